"""Policies as code: `sentinel apply -f sentinel.yaml` and `sentinel export`.

A project's configuration and policies live in one file (YAML or JSON; its JSON Schema is
docs/schemas/sentinel-file.v1.json, generated from the domain's models by `file_schema()`):

    version: 1
    project: shop            # optional: else --project or the context's
    config: {...}            # as PUT .../config takes it
    policies: {unit-tests: {...}, ...}   # each as PUT .../policies/{id} takes it

`apply` validates the file with the domain's own models before any request, reads the gate's current
configuration and policies, shows what would change, and (after confirmation) sends the configuration and
the policies shown added or changed as one `PUT .../bundle` naming the configuration version it read, so a
configuration changed meanwhile is refused rather than overwritten, a policy shown unchanged is never
re-sent over another admin's change, and a refused or failed apply changes nothing. (A policy shown changed
is written as the file says, even if another admin changed it again since the read: If-Match guards the
configuration only.) Policies the file does not name are left as they
are (a policy is never deleted). `export` writes the current ones in the same form, so `export` then
`apply --dry-run` shows no change.

These are server-distribution commands only because they read YAML; they speak HTTP with the caller's token
like every persona command."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sentinel_client.api import SentinelClient
from sentinel_client.cli_context import add_persona_options, body_of, load_persona
from sentinel_client.cli_output import CommandRefused, confirm, emit, progress
from sentinel_domain.models import MAX_BUNDLE_POLICIES, PROJECT_ID, Ident, Policy, ProjectConfig
from sentinel_domain.openapi.errors import MalformedOpenApi
from sentinel_domain.openapi.loader import read_text

FILE_VERSION = 1
SCHEMA_PATH = "docs/schemas/sentinel-file.v1.json"
SCHEMA_ID = "https://sentinel.invalid/schemas/sentinel-file.v1.json"
MAX_FILE_BYTES = 256 * 1024  # the bundle route's body limit: a larger file could never be applied
FIX_THE_FILE = f"fix the file (its JSON Schema is {SCHEMA_PATH}), then run `sentinel apply -f FILE --dry-run`"
MAX_SHOWN = 400  # characters of one value in the human diff


class SentinelFile(BaseModel):
    """One project's configuration and policies, as `sentinel apply` reads and `sentinel export` writes."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="Sentinel project file, version 1")

    version: Literal[1] = Field(description="the file format's version")
    project: str | None = Field(
        default=None, pattern=PROJECT_ID, description="the project; else --project or the context's"
    )
    config: ProjectConfig = Field(description="the project configuration, as PUT .../config takes it")
    policies: dict[Ident, Policy] = Field(
        default_factory=dict,
        max_length=MAX_BUNDLE_POLICIES,
        description="policies by id, each as PUT .../policies/{policy_id} takes it; policies not named "
        "here are left as they are",
    )


def file_schema() -> dict[str, Any]:
    """The JSON Schema of the file, from the models the gate validates with (published at SCHEMA_PATH)."""
    schema = SentinelFile.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, **schema}


def schema_text() -> str:
    return json.dumps(file_schema(), indent=2, sort_keys=True) + "\n"


# ---- reading and checking the file ------------------------------------------------------------------------


def _where(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (("." if path else "") + str(part))
    return path or "(top level)"


def read_file(name: str, stdin: Any = None) -> SentinelFile:
    """The file (or standard input for `-`), parsed and validated; any problem refuses with
    `<file>:<path>: message` and names how many more there are."""
    try:
        if name == "-":
            raw = (stdin or sys.stdin).buffer.read(MAX_FILE_BYTES + 1)
        else:
            with open(name, "rb") as handle:
                raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise CommandRefused(
            "FILE_UNREADABLE", f"{name}: {error.strerror or error}", "check the path and its permissions"
        ) from None
    if len(raw) > MAX_FILE_BYTES:
        raise CommandRefused("VALIDATION_FAILED", f"{name}: larger than {MAX_FILE_BYTES} bytes", FIX_THE_FILE)
    try:
        data = read_text(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise CommandRefused("VALIDATION_FAILED", f"{name}: not UTF-8 text", FIX_THE_FILE) from None
    except MalformedOpenApi as error:
        text = str(error).replace("the document", "the file")
        raise CommandRefused("VALIDATION_FAILED", f"{name}: {text}", FIX_THE_FILE) from None
    if not isinstance(data, dict):
        raise CommandRefused(
            "VALIDATION_FAILED", f"{name}: the file must be a mapping with version, config and policies"
        )
    try:
        return SentinelFile.model_validate(data)
    except ValidationError as error:
        problems = error.errors()
        first = problems[0]
        message = "unknown field" if first["type"] == "extra_forbidden" else first["msg"]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise CommandRefused(
            "VALIDATION_FAILED", f"{name}:{_where(tuple(first['loc']))}: {message}{more}", FIX_THE_FILE
        ) from None


def _project(args: argparse.Namespace, persona: Any, from_file: str | None) -> str:
    """The file's project wins over the context's; an explicit --project that disagrees is refused."""
    if from_file is None:
        return str(persona.project())
    flag = getattr(args, "project", None)
    if flag and flag != from_file:
        raise CommandRefused(
            "VALIDATION_FAILED",
            f"the file is for project {from_file}, --project names {flag}",
            "drop --project, or change the file's project",
        )
    return from_file


# ---- the gate's current versions --------------------------------------------------------------------------


def read_current(client: SentinelClient, project: str) -> dict[str, Any]:
    """The configuration (None before the first) and every policy, each as the models normalise it, with
    their versions."""
    listed: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = body_of(client.list_policies(project, cursor=cursor), 200)
        listed += page.get("policies", [])
        cursor = page.get("next_cursor")
        if not cursor:
            break
    policies: dict[str, dict[str, Any]] = {}
    versions: dict[str, int] = {}
    for entry in listed:
        one = body_of(client.get_policy(project, entry["policy_id"]), 200)
        policies[one["policy_id"]] = Policy.model_validate(one["policy"]).model_dump(mode="json")
        versions[one["policy_id"]] = int(one["version"])
    answer = client.get_config(project)
    if answer.status == 404:  # the project exists (its policies were listed): it has no configuration yet
        config, version = None, 0
    else:
        body = body_of(answer, 200)
        config, version = ProjectConfig.model_validate(body["config"]).stored(), int(body["version"])
    return {"config": config, "config_version": version, "policies": policies, "versions": versions}


# ---- the diff ---------------------------------------------------------------------------------------------


def _key_changes(old: dict[str, Any] | None, new: dict[str, Any]) -> list[dict[str, Any]]:
    before = old or {}
    return [
        {"key": key, "old": before.get(key), "new": new.get(key)}
        for key in sorted({*before, *new})
        if before.get(key) != new.get(key)
    ]


def plan_changes(wanted: SentinelFile, current: dict[str, Any]) -> dict[str, Any]:
    """What applying the file would change, key by key: the configuration and each policy named."""
    config = wanted.config.stored()
    added, changed, unchanged = [], {}, []
    for pid, policy in sorted(wanted.policies.items()):
        body = policy.model_dump(mode="json")
        if pid not in current["policies"]:
            added.append(pid)
        elif current["policies"][pid] != body:
            changed[pid] = _key_changes(current["policies"][pid], body)
        else:
            unchanged.append(pid)
    return {
        "config": {
            "status": "added"
            if current["config"] is None
            else ("changed" if current["config"] != config else "unchanged"),
            "version": current["config_version"],
            "changes": _key_changes(current["config"], config),
        },
        "policies": {
            "added": {pid: wanted.policies[pid].model_dump(mode="json") for pid in added},
            "changed": changed,
            "unchanged": unchanged,
            "untouched": sorted(set(current["policies"]) - set(wanted.policies)),
        },
    }


def differs(changes: dict[str, Any]) -> bool:
    return changes["config"]["status"] != "unchanged" or bool(
        changes["policies"]["added"] or changes["policies"]["changed"]
    )


def _shown(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"


def _compact(value: Any) -> Any:
    """A list entry without its unset (null) fields: a derivation rule reads as it was written."""
    return {k: v for k, v in value.items() if v is not None} if isinstance(value, dict) else value


def _list_lines(old: Any, new: Any) -> list[str] | None:
    """A list's entries removed and added, when both sides are lists (rules, environments, publishers)."""
    if not (isinstance(old, list) and isinstance(new, list)):
        return None
    olds, news = [_shown(_compact(x)) for x in old], [_shown(_compact(x)) for x in new]
    lines = [f"      - {x}" for x in olds if x not in news] + [f"      + {x}" for x in news if x not in olds]
    return lines or ["      (same entries, new order)"]


def _change_lines(changes: list[dict[str, Any]]) -> list[str]:
    lines = []
    for change in changes:
        if change["old"] is None:
            lines.append(f"    + {change['key']}: {_shown(change['new'])}")
        elif change["new"] is None:
            lines.append(f"    - {change['key']}: {_shown(change['old'])}")
        else:
            entries = _list_lines(change["old"], change["new"])
            if entries is None:
                lines.append(f"    ~ {change['key']}: {_shown(change['old'])} → {_shown(change['new'])}")
            else:
                lines += [f"    ~ {change['key']}:", *entries]
    return lines


def render(project: str, changes: dict[str, Any]) -> str:
    """The diff for people: the configuration key by key, then each policy (added, changed, unchanged)."""
    config = changes["config"]
    lines = [f"project {project}"]
    if config["status"] == "added":
        lines.append("  config: new (version 1)")
        lines += _change_lines(config["changes"])
    elif config["status"] == "changed":
        lines.append(f"  config: version {config['version']} → {config['version'] + 1}")
        lines += _change_lines(config["changes"])
    else:
        lines.append(f"  config: unchanged (version {config['version']})")
    policies = changes["policies"]
    for pid, body in policies["added"].items():
        lines.append(f"  policy {pid}: new")
        lines += [f"    + {key}: {_shown(value)}" for key, value in body.items()]
    for pid, key_changes in policies["changed"].items():
        lines.append(f"  policy {pid}: changed")
        lines += _change_lines(key_changes)
    lines.append(f"  policies unchanged: {len(policies['unchanged'])}")
    if policies["untouched"]:
        lines.append(f"  on the gate, not in the file (left as they are): {', '.join(policies['untouched'])}")
    return "\n".join(lines)


# ---- commands ---------------------------------------------------------------------------------------------


def cmd_apply(args: argparse.Namespace) -> int:
    wanted = read_file(args.file)
    persona = load_persona(args)
    project = _project(args, persona, wanted.project)
    client = persona.client()
    with progress(f"reading {project}'s configuration and policies"):
        current = read_current(client, project)
    changes = plan_changes(wanted, current)
    result: dict[str, Any] = {
        "project": project,
        "changes": changes,
        "dry_run": args.dry_run,
        "applied": None,
    }
    if args.dry_run or not differs(changes):
        emit(
            args.json,
            result,
            lambda _d: render(project, changes) + ("" if differs(changes) else "\nno change"),
        )
        return 0
    if not args.json:
        print(render(project, changes))
    confirm(f"apply these changes to project {project}?", yes=args.yes)
    # Only the policies the diff showed added or changed: the If-Match names the configuration's version
    # alone, so a policy sent as "unchanged" would overwrite whatever another admin set since the read (a
    # tightened policy reverted, in a diff nobody saw). Those left out stay as they are on the gate.
    shown = {*changes["policies"]["added"], *changes["policies"]["changed"]}
    bundle = {
        "config": wanted.config.stored(),
        "policies": {
            pid: policy.model_dump(mode="json") for pid, policy in wanted.policies.items() if pid in shown
        },
        # What the diff was made from: a policy another admin changed meanwhile is refused, not reverted.
        "expected_policy_versions": {
            pid: current["versions"].get(pid, 0) for pid in wanted.policies if pid in shown
        },
    }
    if_match = str(current["config_version"]) if current["config"] is not None else None
    answer = client.put_bundle(project, bundle, if_match=if_match)
    if answer.status in (412, 428):
        raise CommandRefused(
            "VERSION_CONFLICT",
            f"project {project}'s configuration or a policy changed since it was read (someone applied "
            "meanwhile); "
            "nothing was changed",
            "run apply again to see the new diff",
        )
    result["applied"] = body_of(answer, 200, 201)
    emit(args.json, result, _applied_words)
    return 0


def _applied_words(result: dict[str, Any]) -> str:
    applied = result["applied"]
    changed = applied["changed"]
    parts = [f"config version {applied['config_version']}" + (" (new)" if changed["config"] else "")]
    if changed["policies"]:
        parts.append(
            "new policy versions: " + ", ".join(f"{p} v{applied['policies'][p]}" for p in changed["policies"])
        )
    return f"applied to {result['project']} (audit seq {applied['seq']}): " + "; ".join(parts)


def export_document(client: SentinelClient, project: str) -> tuple[dict[str, Any], dict[str, Any]]:
    current = read_current(client, project)
    if current["config"] is None:
        raise CommandRefused(
            "NOT_FOUND",
            f"project {project} has no configuration yet: there is nothing to export",
            "write a sentinel.yaml (docs/examples/sentinel.yaml) and run `sentinel apply -f sentinel.yaml`",
        )
    document = {
        "version": FILE_VERSION,
        "project": project,
        "config": current["config"],
        "policies": dict(sorted(current["policies"].items())),
    }
    return document, current


def _yaml(document: dict[str, Any], project: str, current: dict[str, Any]) -> str:
    import yaml

    versions = ", ".join(f"{pid} v{v}" for pid, v in sorted(current["versions"].items())) or "none"
    header = (
        f"# sentinel export: project {project}, config version {current['config_version']}, "
        f"policies {versions}\n# schema: {SCHEMA_PATH}; apply with `sentinel apply -f FILE`\n"
    )
    return header + yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)


def _write(path: str, text: str) -> None:
    target = Path(path)
    scratch = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        scratch.write_text(text, encoding="utf-8")
        os.replace(scratch, target)
    except OSError as error:
        scratch.unlink(missing_ok=True)
        raise CommandRefused(
            "FILE_UNWRITABLE", f"{path}: {error.strerror or error}", "check the directory and its permissions"
        ) from None


def cmd_export(args: argparse.Namespace) -> int:
    persona = load_persona(args)
    project = persona.project()
    with progress(f"reading {project}'s configuration and policies"):
        document, current = export_document(persona.client(), project)
    fmt = args.format or ("json" if (args.output or "").endswith(".json") else "yaml")
    text = (
        json.dumps(document, indent=2, ensure_ascii=False) + "\n"
        if fmt == "json"
        else _yaml(document, project, current)
    )
    if args.output is None or args.output == "-":
        if args.json:
            emit(True, document)
        else:
            sys.stdout.write(text)
        return 0
    _write(args.output, text)
    summary = {
        "written": args.output,
        "format": fmt,
        "project": project,
        "config_version": current["config_version"],
        "policies": current["versions"],
    }
    emit(
        args.json,
        summary,
        lambda s: (
            f"wrote {s['written']}: project {project}, config version {s['config_version']}, "
            f"{len(s['policies'])} policies"
        ),
    )
    return 0


def register(commands: Any) -> None:
    apply = commands.command(
        "apply", help="apply a project's configuration and policies from a file, as one write"
    )
    apply.add_argument("-f", "--file", required=True, metavar="FILE", help="YAML or JSON; - for stdin")
    apply.add_argument("--dry-run", action="store_true", help="show what would change, change nothing")
    apply.add_argument("--yes", action="store_true", help="apply without asking (needed off a terminal)")
    add_persona_options(apply)
    apply.set_defaults(run=cmd_apply)

    export = commands.command("export", help="write a project's configuration and policies as a file")
    export.add_argument("-o", "--output", metavar="FILE", help="write here (default: standard output)")
    export.add_argument("--format", choices=["yaml", "json"], help="default: yaml, or json for *.json")
    add_persona_options(export)
    export.set_defaults(run=cmd_export)


def main(argv: list[str] | None = None) -> int:
    """`python -m sentinel_runner.apply_cli --schema [--write]`: print (or write) the file's JSON Schema."""
    parser = argparse.ArgumentParser(prog="python -m sentinel_runner.apply_cli")
    parser.add_argument("--schema", action="store_true", required=True, help="print the file's JSON Schema")
    parser.add_argument("--write", metavar="PATH", help=f"write it here instead (e.g. {SCHEMA_PATH})")
    args = parser.parse_args(argv)
    if args.write:
        Path(args.write).write_text(schema_text(), encoding="utf-8")
    else:
        sys.stdout.write(schema_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
