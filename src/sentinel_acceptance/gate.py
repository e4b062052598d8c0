"""One acceptance run: every check in order, each result recorded, one attempt report written.

The checks run even after one fails (a report that names every problem beats one that names the first), but a
check that needs what an earlier one could not provide is "blocked", and blocked fails the gate like failed.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sentinel_service import names
from sentinel_service.adapters.tables import PK, SK

from . import canary, deployment, receipts, service
from .checks import BLOCKED, CheckFailed, CheckLog, CheckResult, CheckSkipped
from .report import DEFAULT_REPORTS, REPO, AttemptReport, now
from .target import BuiltPackage, Target, read_build
from .tokens import TokensUnavailable, load_tokens

TITLES = {
    "build": "The build's digest file is readable and its zips are the ones it describes",
    "stack_status": "The stack's status is CREATE_COMPLETE or UPDATE_COMPLETE",
    "route_integrations": "Every route invokes the live alias of its function, behind the authorizer unless "
    "public",
    "package_digests": "The version each function's live alias invokes runs the built zip and the built "
    "layers",
    "health": "/v1/health answers anonymously with runtime, model provider and package digest, and no secret",
    "auth_refusals": "Every stateful route refuses an anonymous caller (401) and a wrong token (403)",
    "receipt_keys": receipts.TITLES["receipt_keys"],
    "acceptance_principals": "The acceptance principals hold roles only in the acceptance project",
    **dict(service.FLOW_CHECKS),
    "receipt": receipts.TITLES["receipt"],
    "alarms": "The stack's CloudWatch alarms exist",
    "alarm_delivery": "An alarm's notification reaches a subscriber of the alarm topic (the canary alarm)",
    "budget": "The stack's AWS Budget exists",
}
CHECK_NAMES = tuple(TITLES)


@dataclass
class Outcome:
    passed: bool
    report: Path
    results: list[CheckResult]

    def result(self, name: str) -> CheckResult:
        return next(r for r in self.results if r.name == name)

    @property
    def failing(self) -> list[str]:
        return [r.name for r in self.results if r.failing]


def run(target: Target, reports_dir: Path = DEFAULT_REPORTS, say: Callable[[str], None] = print) -> Outcome:
    started_at, started = now(), time.monotonic()
    report = AttemptReport(reports_dir)
    report.claim({"started_at": started_at, "target": target.describe(), "source": _source()})
    say(
        f"acceptance attempt {report.attempt} against {target.kind} stack {target.stack_name} "
        f"({target.region}) -> {report.path}"
    )
    log = CheckLog(on_result=lambda r: say(f"  {r.status:<12} {r.name:<22} {r.detail}"))
    found, front = deployment.Deployment(), service.Front(api_url=target.api_url)
    built: dict[str, BuiltPackage] = {}

    def need_build() -> dict[str, BuiltPackage]:
        if not built:
            raise CheckSkipped(BLOCKED, "the build's digests could not be read")
        return built

    def build_check() -> tuple[str, dict[str, Any]]:
        built.update(read_build(target.build_dir))
        mismatched = [
            p.name
            for p in built.values()
            if p.path.exists() and hashlib.sha256(p.path.read_bytes()).hexdigest() != p.sha256
        ]
        evidence = {
            k: {"sha256": p.sha256, "code_sha256": p.code_sha256, "present": p.path.exists()}
            for k, p in built.items()
        }
        if set(built) != {"functions", "core_layer", "deps_layer"}:
            raise CheckFailed(f"the digest file names {sorted(built)}", evidence)
        if mismatched:
            raise CheckFailed(
                f"{', '.join(mismatched)} differ from digests.json: run `make build` again", evidence
            )
        return (
            f"functions {built['functions'].sha256[:16]}…, core layer {built['core_layer'].sha256[:16]}…, "
            f"deps layer {built['deps_layer'].sha256[:16]}…",
            evidence,
        )

    log.run("build", TITLES["build"], "the local build folder", build_check)
    log.run(
        "stack_status",
        TITLES["stack_status"],
        f"CloudFormation ({target.cloud})",
        lambda: deployment.stack_status(target, found),
    )
    front.api_url = target.api_url or found.outputs.get(target.api_url_output)
    log.run(
        "route_integrations",
        TITLES["route_integrations"],
        f"API Gateway ({target.cloud})",
        lambda: deployment.route_integrations(target, found),
    )
    log.run(
        "package_digests",
        TITLES["package_digests"],
        f"Lambda ({target.cloud})",
        lambda: deployment.package_digests(target, _need_outputs(found), need_build()),
    )

    try:
        front.tokens = load_tokens(target.env, target.stage, _secrets_client(target))
    except TokensUnavailable as missing:
        front.token_problem = str(missing)
    forbidden = _forbidden(target, found, front)
    log.run(
        "health",
        TITLES["health"],
        target.front_door,
        lambda: service.health(target, front, need_build(), found.environments, forbidden),
    )
    log.run(
        "auth_refusals",
        TITLES["auth_refusals"],
        target.front_door,
        lambda: service.auth_refusals(target, front),
    )
    published: dict[str, str] = {}
    log.run(
        "receipt_keys",
        TITLES["receipt_keys"],
        target.front_door,
        lambda: receipts.receipt_keys(target, front, published),
    )
    log.run(
        "acceptance_principals",
        TITLES["acceptance_principals"],
        target.front_door,
        lambda: _principals(target, front),
    )

    counter = OutboxCounter(target, found, front)
    flow_started = time.monotonic()
    if front.tokens is not None and front.api_url and log.status("acceptance_principals") == "passed":
        service.run_flow(target, front, counter)
    elif front.tokens is not None:
        front.tokens = None
        front.token_problem = "the acceptance principals check did not pass, so the flow did not run"
    flow_ms = int((time.monotonic() - flow_started) * 1000)
    for name, title in service.FLOW_CHECKS:
        log.run(
            name,
            title,
            f"{target.front_door}; outbox read from the state table ({target.cloud})"
            if name == "action_replay"
            else target.front_door,
            lambda name=name: service.flow_check(name, target, front, counter),
        )
    log.run(
        "receipt",
        TITLES["receipt"],
        f"{target.front_door}; verified offline",
        lambda: receipts.receipt(target, front, published),
    )

    log.run(
        "alarms", TITLES["alarms"], f"CloudWatch ({target.cloud})", lambda: deployment.alarms(target, found)
    )
    log.run(
        "alarm_delivery",
        TITLES["alarm_delivery"],
        f"CloudWatch SetAlarmState, SNS to an SQS queue of the run ({target.cloud})",
        lambda: canary.alarm_delivery(target, _need_outputs(found)),
    )
    log.run(
        "budget", TITLES["budget"], f"AWS Budgets ({target.cloud})", lambda: deployment.budget(target, found)
    )

    body = {
        "status": "passed" if log.passed else "failed",
        "started_at": started_at,
        "finished_at": now(),
        "duration_ms": int((time.monotonic() - started) * 1000),
        "target": target.describe() | {"api_url": front.api_url},
        "source": _source(),
        "summary": log.counts(),
        "failing_checks": [r.name for r in log.results if r.failing],
        "digests": {
            "built": {k: {"sha256": p.sha256, "code_sha256": p.code_sha256} for k, p in built.items()},
            "deployed": found.deployed,
            "package_digest_output": found.outputs.get(names.OUTPUT_PACKAGE_DIGEST),
            "health_package_digest": front.health.get("package_digest"),
        },
        "checks": [r.to_json() for r in log.results],
        "flow": {
            "candidate_id": front.flow.candidate_id if front.flow else None,
            "error": front.flow_error or None,
            "steps": front.steps,
            "ms": flow_ms,
            "requests": len(front.record),
            "exchanges": [
                {
                    "role": x.role,
                    "method": x.method,
                    "path": x.path,
                    "status": x.status,
                    "replayed": x.replayed,
                    "ms": x.ms,
                }
                for x in front.record
            ],
        },
        "timings_ms": {r.name: r.duration_ms for r in log.results},
    }
    path = report.write(_redact(body, front.tokens.secrets() if front.tokens else _env_tokens(target)))
    say(
        f"acceptance {'PASSED' if log.passed else 'FAILED'}: "
        + ", ".join(f"{count} {status}" for status, count in log.counts().items() if count)
        + (f"; failing: {', '.join(body['failing_checks'])}" if body["failing_checks"] else "")
        + f" ({body['duration_ms'] / 1000:.1f} s) -> {path}"
    )
    return Outcome(log.passed, path, log.results)


def _need_outputs(found: deployment.Deployment) -> deployment.Deployment:
    if not found.outputs:
        raise CheckSkipped(BLOCKED, "the stack's outputs could not be read")
    return found


def _principals(target: Target, front: service.Front) -> tuple[str, dict[str, Any]]:
    if front.tokens is None:
        raise CheckFailed(f"no acceptance tokens: {front.token_problem}")
    return service.principals(target, front)


def _secrets_client(target: Target) -> Any:
    try:
        return target.client("secretsmanager")
    except Exception:  # no region or credentials: the environment variables are then the only source
        return None


def _forbidden(target: Target, found: deployment.Deployment, front: service.Front) -> list[str]:
    """Values an anonymous answer must never contain: the tokens, the account id, the token key secret."""
    values = list(front.tokens.secrets()) if front.tokens else []
    values.append(found.outputs.get(names.OUTPUT_TOKEN_KEY_SECRET_ARN) or "")
    try:
        values.append(target.client("sts").get_caller_identity()["Account"])
    except Exception:  # unknown account: the 12-digit pattern still catches an account id in the body
        pass
    return [v for v in values if v]


def _env_tokens(target: Target) -> list[str]:
    return [v for k, v in target.env.items() if k.startswith("SENTINEL_ACCEPTANCE_TOKEN_") and v]


def _redact(body: dict[str, Any], secrets: list[str]) -> dict[str, Any]:
    """The report must never hold a token, whatever a check put in its evidence."""
    text = json.dumps(body, default=str)
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted token]")
    return json.loads(text)


def _source() -> dict[str, Any]:
    """The commit the run was made from (read-only git; absent outside a checkout)."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=5
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
        )
    except (OSError, subprocess.SubprocessError):
        return {"commit": None}
    return {"commit": commit or None, "dirty": dirty}


class OutboxCounter:
    """How many side effects the outbox holds for one execution, read from the stack's state table: exactly
    the items the relay moves to the bus (delivery is at least once; the outbox item is the one truth)."""

    def __init__(self, target: Target, found: deployment.Deployment, front: service.Front) -> None:
        self.target, self.found, self.front = target, found, front

    def __call__(self, execution_id: str) -> int:
        table = self.found.outputs.get(names.OUTPUT_STATE_TABLE)
        created = [
            x
            for x in self.front.record
            if x.role in service.FLOW_ROLES
            and x.method == "POST"
            and x.path.endswith("/candidates")
            and x.status == 201
        ]
        if not table or not created:
            raise CheckFailed("the outbox cannot be read: no state table output or no candidate")
        partition = f"P#{self.target.project}#C#{created[-1].body['candidate_id']}"
        dynamodb, count, start = self.target.client("dynamodb"), 0, None
        while True:
            page = dynamodb.query(
                TableName=table,
                ConsistentRead=True,
                KeyConditionExpression=f"{PK} = :pk AND begins_with({SK}, :outbox)",
                ExpressionAttributeValues={":pk": {"S": partition}, ":outbox": {"S": "O#"}},
                **({"ExclusiveStartKey": start} if start else {}),
            )
            for item in page.get("Items", []):
                entry = json.loads(item.get("item", {}).get("S", "{}"))
                if entry.get("kind") != "action" or entry.get("execution_id") != execution_id:
                    continue
                if (
                    item.get(names.OUTBOX_SYNTHETIC_ATTRIBUTE) != {"S": "1"}
                    or entry.get("synthetic") is not True
                ):
                    # The acceptance project is synthetic: an unmarked side effect would reach a consumer.
                    raise CheckFailed(
                        f"the side effect of {execution_id} is not marked synthetic: the bus's consumer "
                        f"rules would take it (is the acceptance project {self.target.project!r} synthetic?)"
                    )
                count += 1
            start = page.get("LastEvaluatedKey")
            if not start:
                return count
