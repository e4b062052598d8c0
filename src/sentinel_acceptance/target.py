"""What a run checks: a deployed stack (kind "aws") or an emulated one on a moto server (kind "emulation"),
the build it must match, and where the acceptance principals' tokens come from."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sentinel_service import names

REPO = Path(__file__).resolve().parents[2]  # src/<package>/<module>.py
DEFAULT_BUILD = REPO / "build"
DEFAULT_PROJECT = "acceptance"
AWS = "aws"
EMULATION = "emulation"
EXPECT_MODES = ("auto", "model", "fallback")


@dataclass(frozen=True)
class BuiltPackage:
    key: str  # functions, core_layer, deps_layer
    name: str
    path: Path
    sha256: str
    code_sha256: str


def read_build(build_dir: Path) -> dict[str, BuiltPackage]:
    """The packages `make build` recorded in digests.json (paths relative to the repository, as it writes
    them, or absolute)."""
    manifest_file = Path(build_dir) / "digests.json"
    if not manifest_file.exists():
        raise FileNotFoundError(f"{manifest_file} is missing: run `make build` first")
    manifest = json.loads(manifest_file.read_text())
    packages = {}
    for key, entry in manifest["packages"].items():
        path = Path(entry["path"])
        packages[key] = BuiltPackage(
            key,
            entry["name"],
            path if path.is_absolute() else REPO / path,
            entry["sha256"],
            entry["code_sha256"],
        )
    return packages


@dataclass
class Emulation:
    """What the emulated deployment is made of, so the report can say what was and was not emulated."""

    template: dict[str, Any]  # the template as synthesized (aliases and layers are resolved through it)
    skipped: dict[str, str]  # logical id -> resource type moto's CloudFormation does not create
    adaptations: list[str]  # every change made to the template so moto accepts it, in words
    runner: dict[str, Any] = field(default_factory=dict)  # how the local runner was started

    def emulated(self, resource_type: str) -> bool:
        return resource_type not in set(self.skipped.values())


@dataclass
class Target:
    kind: str
    stack_name: str
    region: str
    build_dir: Path = DEFAULT_BUILD
    project: str = DEFAULT_PROJECT
    expect_mode: str = "auto"
    api_url: str | None = None  # None: the stack's ApiUrl output (NextApiUrl when checking `next`)
    # Which aliases the run accepts: `next`, what a deploy just published, served by the acceptance API
    # before the promote step moves `live` (make deploy); `live`, what production serves now.
    alias: str = names.LIVE_ALIAS
    endpoint_url: str | None = None  # the moto server (emulation only)
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))  # where tokens are looked up
    emulation: Emulation | None = None
    _clients: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in (AWS, EMULATION):
            raise ValueError(f"unknown target kind {self.kind!r}")
        if self.alias not in (names.LIVE_ALIAS, names.NEXT_ALIAS):
            raise ValueError(f"the alias to accept must be {names.LIVE_ALIAS} or {names.NEXT_ALIAS}")
        if self.expect_mode not in EXPECT_MODES:
            raise ValueError(f"expected proposal mode must be one of {', '.join(EXPECT_MODES)}")
        if (self.kind == EMULATION) != (self.emulation is not None and self.endpoint_url is not None):
            raise ValueError("an emulation target needs its moto endpoint and emulation facts, and only it")

    @property
    def stage(self) -> str:
        prefix = names.stack_name("")
        return self.stack_name[len(prefix) :] if self.stack_name.startswith(prefix) else self.stack_name

    @property
    def cloud(self) -> str:
        """Who answers the AWS reads, for the report."""
        return "AWS" if self.kind == AWS else "moto server (emulated AWS)"

    @property
    def front_door(self) -> str:
        """Who answers the HTTP checks, for the report."""
        return (
            "API Gateway" if self.kind == AWS else "local runner from the built packages (emulated gateway)"
        )

    @property
    def api_url_output(self) -> str:
        """The stack output naming the API that serves `alias`."""
        return names.OUTPUT_API_URL if self.alias == names.LIVE_ALIAS else names.OUTPUT_NEXT_API_URL

    @property
    def expected_runtime(self) -> str:
        return names.RUNTIME_AWS_LAMBDA if self.kind == AWS else "local"

    def client(self, service: str) -> Any:
        """One boto3 client per service, built on first use (never at import time)."""
        if service not in self._clients:
            import boto3
            from botocore.config import Config

            kwargs: dict[str, Any] = {
                "region_name": self.region,
                "config": Config(
                    connect_timeout=5, read_timeout=30, retries={"max_attempts": 4, "mode": "standard"}
                ),
            }
            if self.endpoint_url:
                # The moto server on loopback checks no signature; fixed credentials keep the operator's own
                # ones from ever being sent to it.
                kwargs.update(
                    endpoint_url=self.endpoint_url,
                    aws_access_key_id="acceptance",
                    aws_secret_access_key="acceptance",
                    aws_session_token=None,
                )
            self._clients[service] = boto3.client(service, **kwargs)
        return self._clients[service]

    def describe(self) -> dict[str, Any]:
        """The target as the report records it: no account id, no credential."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "stack": self.stack_name,
            "region": self.region,
            "project": self.project,
            "expect_mode": self.expect_mode,
            "api_url": self.api_url,
            "alias": self.alias,
            "build_dir": str(self.build_dir),
        }
        if self.emulation is not None:
            out["emulation"] = {
                "moto_endpoint": self.endpoint_url,
                "resources_not_emulated": sorted(set(self.emulation.skipped.values())),
                "template_adaptations": self.emulation.adaptations,
                "runner": self.emulation.runner,
            }
        return out
