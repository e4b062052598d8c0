"""What the infrastructure tests share: the repository root on sys.path, the context they synthesize with,
and small readers of a synthesized template."""

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.paths import REPO

if str(REPO) not in sys.path:  # app.py and infra/ live at the repository root, outside the installed packages
    sys.path.insert(0, str(REPO))

from sentinel_service import names  # noqa: E402
from sentinel_service.http.routes import FUNCTIONS  # noqa: E402

EVERY_FUNCTION = (*FUNCTIONS, names.AUTHORIZER_FUNCTION)  # the API's functions
# Invoked by the state table's stream and by a schedule, never through the API (issue 13).
INTEGRITY_FUNCTIONS = (names.WITNESS_WRITER_FUNCTION, names.CHAIN_VERIFIER_FUNCTION)
# The forge check publisher: the bus's rule and its schedule invoke it (issue 15).
BACKGROUND_FUNCTIONS = (*INTEGRITY_FUNCTIONS, names.FORGE_CHECKS_FUNCTION)
# Invoked by the bus (forge outbox items), never through the API (issue 15).
WORKER_FUNCTIONS = (names.FORGE_WORKER_FUNCTION,)
ALL_FUNCTIONS = (*EVERY_FUNCTION, *BACKGROUND_FUNCTIONS, *WORKER_FUNCTIONS)

# A context that takes every optional branch (an alarm e-mail, a Bedrock model behind a cross-region
# inference profile), so their resources and acknowledgements are checked too.
ALARM_EMAIL = "ops@example.com"
MODEL_ID = "eu.anthropic.claude-sonnet-4-5-20250929-v1:0"
CONTEXT = {"stage": "test", "alarmEmail": ALARM_EMAIL, "modelProvider": "bedrock", "modelId": MODEL_ID}
STACK = names.stack_name("test")


@dataclass(frozen=True)
class Synthesized:
    outdir: Path
    build_dir: Path
    template: dict[str, Any]
    nag_findings: set[tuple[str, str]]  # (rule, construct path) cdk-nag raised with acknowledgements withheld
    acknowledgements: list[tuple[str, str, str]]  # (construct path, rule, reason) the code acknowledges
    failure: str = ""  # why the synth failed, for the synth that must pass

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return self.template["Resources"]

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: r for k, r in self.resources.items() if r["Type"] == kind}

    def properties(self, kind: str) -> list[dict[str, Any]]:
        return [r.get("Properties", {}) for r in self.of_type(kind).values()]


def ref_name(value: Any) -> str | None:
    """The logical id a {"Ref": id} or {"Fn::GetAtt": [id, attr]} points at."""
    if isinstance(value, dict) and "Ref" in value:
        return value["Ref"]
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return value["Fn::GetAtt"][0]
    return None


def resource_key(resource: Any) -> str:
    """A policy resource as `<logical id>` or `<logical id>/<suffix>` (for bucket object ARNs)."""
    name = ref_name(resource)
    if name:
        return name
    if isinstance(resource, dict) and "Fn::Join" in resource:
        sep, parts = resource["Fn::Join"]
        if len(parts) == 2 and ref_name(parts[0]) and isinstance(parts[1], str):
            return f"{ref_name(parts[0])}{parts[1]}"
    return resource if isinstance(resource, str) else repr(resource)


def statements(policy: dict[str, Any]) -> list[dict[str, Any]]:
    return policy["Properties"]["PolicyDocument"]["Statement"]


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def functions_by_name(synth: Synthesized) -> dict[str, tuple[str, dict[str, Any]]]:
    """{function name: (logical id, properties)}, named by the handler each one runs."""
    found = {}
    for logical_id, resource in synth.of_type("AWS::Lambda::Function").items():
        handler = resource["Properties"]["Handler"]
        found[handler.split(".")[-2]] = (logical_id, resource["Properties"])
    return found


def nag_findings(outdir: Path) -> set[tuple[str, str]]:
    report = json.loads((outdir / "validation-report.json").read_text())
    return {
        (violation["ruleName"], construct["constructPath"])
        for plugin in report["pluginReports"]
        if plugin["pluginName"] == "AwsSolutions"
        for violation in plugin["violations"]
        for construct in violation["violatingConstructs"]
    }


class WithheldAcknowledgements:
    """Validations.of(scope) that records acknowledgements instead of applying them."""

    def __init__(self, real: Any, recorded: list[tuple[str, str, str]]) -> None:
        self._real = real
        self._recorded = recorded

    def of(self, scope: Any) -> Any:
        validations, recorded = self._real(scope), self._recorded

        class Recording:
            def acknowledge(self, acknowledgment: Any) -> None:
                recorded.append((scope.node.path, acknowledgment.id, acknowledgment.reason))

            def __getattr__(self, name: str) -> Any:
                return getattr(validations, name)

        return Recording()
