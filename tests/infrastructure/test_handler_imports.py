"""Each Lambda handler imports only what it uses, so cold starts stay cheap (`make bench` measures them).

A fresh interpreter imports one handler, as Lambda's INIT phase does, and lists `sys.modules`. The allowed
sets below are the state measured when this test was written (docs/benchmarks.md has the cost of each
module). A handler that starts importing something new fails here first: make that import lazy, or widen
its set here with the measured cost in the commit message."""

import json
import os
import subprocess
import sys
from functools import cache

import pytest

from support.paths import REPO

ROOT = REPO
ROUTED = ("actions", "evidence", "forge", "gating", "health", "plans", "review")
# The witness writer and the chain verifier (issue 13): the chain seal and the core's audit, nothing more;
# their AWS clients and the store are built on the first invocation (sentinel_service.witnessing).
INTEGRITY = ("witness_writer", "chain_verifier")
# The forge worker (fed by the bus, never by the API): the core's forge use case, no Powertools.
WORKERS = ("forge_worker",)
HANDLERS = (*ROUTED, "authorizer", *INTEGRITY, *WORKERS)

# What the validating resolver and the core bring: Powertools (which imports botocore's top package for
# its user agent, and jmespath for its data classes), pydantic, rfc8785, defusedxml.
RESOLVER_DEPENDENCIES = frozenset(
    {
        "annotated_types",
        "aws_lambda_powertools",
        "botocore",
        "defusedxml",
        "jmespath",
        "pydantic",
        "pydantic_core",
        "rfc8785",
        "typing_extensions",
        "typing_inspection",
    }
)
ALLOWED_THIRD_PARTY = (
    {name: RESOLVER_DEPENDENCIES for name in ROUTED}
    | {
        # botocore.exceptions to judge store errors, nothing else: the identity constants it needs live in
        # the pydantic-free sentinel_domain.identity (pydantic would cost about 90 ms with bytecode, 200 ms
        # without).
        "authorizer": frozenset({"botocore"}),
    }
    | {name: frozenset({"rfc8785"}) for name in INTEGRITY}
    | {name: RESOLVER_DEPENDENCIES - {"aws_lambda_powertools", "botocore", "jmespath"} for name in WORKERS}
)
# Powertools subpackages: aws_lambda_powertools/__init__ loads logging, metrics and tracing (the Tracer
# class, never the X-Ray SDK); the event handler loads its data classes and jmespath helpers.
ALLOWED_POWERTOOLS = {
    name: frozenset(
        {
            "event_handler",
            "exceptions",
            "logging",
            "metrics",
            "middleware_factory",
            "package_logger",
            "shared",
            "tracing",
            "utilities",
            "warnings",
        }
    )
    for name in ROUTED
} | {name: frozenset() for name in ("authorizer", *INTEGRITY, *WORKERS)}
ALLOWED_POWERTOOLS_UTILITIES = {name: frozenset({"data_classes", "jmespath_utils"}) for name in ROUTED} | {
    name: frozenset() for name in ("authorizer", *INTEGRITY, *WORKERS)
}

# Never at import, whatever the handler: each would cost every cold start and do nothing for it.
NEVER_AT_IMPORT = {
    "boto3": "clients are built on the first call (the composition root, the authorizer's _resolve)",
    "botocore.client": "no AWS client may be built at import (moto and cold starts need them lazy)",
    "botocore.session": "no AWS client may be built at import",
    "urllib3": "the AWS transport comes with the first client, not at import",
    "aws_xray_sdk": "tracing is off: the X-Ray SDK alone costs about 190 ms",
    "wrapt": "only the X-Ray SDK needs it",
    "aws_lambda_powertools.utilities.parser": "routes validate through the resolver; no parser envelopes",
    "aws_lambda_powertools.utilities.idempotency": "idempotency lives in the state store's transaction",
    "aws_lambda_powertools.utilities.validation": "no JSON-schema validation at import",
    "aws_lambda_powertools.utilities.batch": "no batch processing in an API handler",
    "yaml": "no handler parses YAML at import; parse OpenAPI documents lazily where they are derived",
    "moto": "the emulator never ships",
    "sentinel_runner": "functions never import the local runner",
    "sentinel_client": "functions never import the client",
}

PROBE = """\
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps(sorted(sys.modules)))
"""


@cache
def modules_loaded_by(handler: str) -> frozenset[str]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        # As on Lambda: a Tracer added at import would switch tracing on and load the X-Ray SDK here too.
        "AWS_LAMBDA_FUNCTION_NAME": f"sentinel-{handler}",
    }
    out = subprocess.run(
        [sys.executable, "-c", PROBE, f"sentinel_service.handlers.{handler}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, f"importing sentinel_service.handlers.{handler} failed:\n{out.stderr[-3000:]}"
    return frozenset(json.loads(out.stdout.strip().splitlines()[-1]))


def third_party(modules: frozenset[str]) -> set[str]:
    roots = {m.split(".")[0] for m in modules if not m.startswith("_")}
    return roots - set(sys.stdlib_module_names) - {"sentinel_service", "sentinel_domain"}


def powertools_parts(modules: frozenset[str], depth: int, prefix: str = "aws_lambda_powertools.") -> set[str]:
    return {".".join(m.split(".")[:depth]).removeprefix(prefix) for m in modules if m.startswith(prefix)}


def test_every_function_has_an_allowed_set() -> None:
    # Given the route table's functions, When a function is added, Then it needs its own allowed set here
    from sentinel_service.http.routes import FUNCTIONS

    assert set(FUNCTIONS) == set(ROUTED)


@pytest.mark.parametrize("handler", HANDLERS)
def test_the_handler_imports_nothing_it_does_not_use(handler: str) -> None:
    # Given a fresh interpreter, When it imports the handler as Lambda's INIT phase does
    modules = modules_loaded_by(handler)
    hint = (
        "find who imports it with: .venv/bin/python -X importtime -c 'import "
        f"sentinel_service.handlers.{handler}'"
    )
    # Then nothing that must wait for the first call, or never ships, was imported
    forbidden = {name: why for name, why in NEVER_AT_IMPORT.items() if name in modules}
    assert forbidden == {}, hint
    # And the third-party packages and Powertools parts are those the handler was measured with
    assert third_party(modules) - ALLOWED_THIRD_PARTY[handler] == set(), hint
    assert powertools_parts(modules, 2) - ALLOWED_POWERTOOLS[handler] == set(), hint
    utilities = powertools_parts(modules, 3, "aws_lambda_powertools.utilities.")
    assert utilities - ALLOWED_POWERTOOLS_UTILITIES[handler] == set(), hint
