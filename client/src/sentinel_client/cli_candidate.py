"""`sentinel candidate create|show|attest`: the requester's candidate from git, its state in words, and the
publisher's attestation of the same change.

`create --from-git BASE..HEAD` reads everything it sends from the clone (sentinel_client.git_change): the
full commit ids, the changed files, and the OpenAPI documents the project's rules name. Everything local is
checked before the first request; a candidate that already exists for the subject, revision and
environment is an answer, not an error (its id is printed and the command exits 0).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from .api import SentinelClient
from .cli_context import Persona, add_persona_options, body_of, load_persona
from .cli_output import CommandRefused, emit, progress, table
from .git_change import GitReader, openapi_changes, parse_openapi_paths, parse_range

# The candidate and change-context routes take at most 2 MiB (API.md); refuse larger bodies before sending.
MAX_CHANGE_BODY_BYTES = 2 * 1024 * 1024


# ---- shared by the requester's and publisher's commands --------------------------------------------------


def read_candidate(client: SentinelClient, project: str, candidate_id: str) -> dict[str, Any]:
    """The candidate's whole state (GET …/candidates/{id}); a refusal raises CommandRefused."""
    body = body_of(client.get_candidate(project, candidate_id), 200)
    if not isinstance(body, dict):
        raise CommandRefused("BAD_RESPONSE", "the candidate read is not a JSON object")
    return body


def read_config(client: SentinelClient, project: str) -> dict[str, Any]:
    """The project's configuration in force (GET …/config, any role)."""
    body = body_of(client.get_config(project), 200)
    config = body.get("config") if isinstance(body, dict) else None
    if not isinstance(config, dict):
        raise CommandRefused("BAD_RESPONSE", "the configuration read has no config object")
    return config


def short(revision: Any) -> str:
    return str(revision or "")[:12]


def who(actor: Any) -> str:
    """A principal as the service shows it: an actor fact ({id, kind, sponsor}) or its id."""
    return str(actor.get("id") if isinstance(actor, dict) else actor)


def obligation_lines(obligations: list[dict[str, Any]]) -> str:
    rows = [
        [str(o.get("obligation_id")), str(o.get("policy_id")), str(o.get("scope")), str(o.get("reason"))]
        for o in obligations
    ]
    return (
        table(rows, ["OBLIGATION", "POLICY", "SCOPE", "WHY"])
        or "  (none: the candidate holds NO_OBLIGATIONS)"
    )


def _git_change(args: argparse.Namespace) -> tuple[GitReader, str, str, list[str], dict[str, str]]:
    """Everything read from the clone before any request: commits, files, and the --openapi paths."""
    given = parse_range(args.from_git)
    paths = parse_openapi_paths(args.openapi or [])
    with progress("reading the change from git"):
        reader = GitReader(os.path.abspath(args.repo or os.getcwd()))
        base, head = reader.resolve(given)
        files = reader.changed_files(base, head)
    return reader, base, head, files, paths


def _change(
    reader: GitReader,
    base: str,
    head: str,
    files: list[str],
    config: dict[str, Any],
    subject: str,
    paths: Any,
) -> dict[str, Any]:
    with progress("reading the OpenAPI documents from git"):
        documents = openapi_changes(reader, base, head, files, config, subject, paths)
    change = {"files": files, "openapi": documents}
    size = len(json.dumps(change, ensure_ascii=False).encode("utf-8"))
    if size > MAX_CHANGE_BODY_BYTES - 4096:
        raise CommandRefused(
            "PAYLOAD_TOO_LARGE",
            f"the change ({len(files)} files, {len(documents)} OpenAPI documents) is {size} bytes; "
            f"the gate takes at most {MAX_CHANGE_BODY_BYTES}",
            "split the change into smaller candidates",
        )
    return change


def _required(persona: Persona, key: str) -> str:
    value = getattr(persona.settings, key, None)
    if not value:
        raise CommandRefused(
            "SETTING_MISSING",
            f"the candidate's {key} is not set",
            f"give --{key}, or save it in your context: `sentinel login --{key} ...`",
        )
    return str(value)


# ---- candidate create ------------------------------------------------------------------------------------


def cmd_create(args: argparse.Namespace) -> int:
    persona = load_persona(args)
    subject, environment = _required(persona, "subject"), _required(persona, "environment")
    project = persona.project()
    reader, base, head, files, paths = _git_change(args)
    client = persona.client()
    change = _change(reader, base, head, files, read_config(client, project), subject, paths)
    body = {
        "subject": subject,
        "base_revision": base,
        "revision": head,
        "environment": environment,
        "change": change,
    }
    with progress("creating the candidate"):
        answer = client.create_candidate(project, body)
    if answer.status == 409 and answer.code == "CANDIDATE_EXISTS" and isinstance(answer.body, dict):
        existing = str(answer.body.get("candidate_id") or "")
        emit(
            args.json,
            {"candidate_id": existing, "existing": True},
            f"{existing}\nnote: a candidate for {subject} at {short(head)} in {environment} already exists; "
            "nothing was created (`sentinel candidate show " + existing + "` shows it)",
        )
        return 0
    created = body_of(answer, 201)
    shown = {
        **created,
        "existing": False,
        "subject": subject,
        "environment": environment,
        "base_revision": base,
        "revision": head,
        "files": len(files),
        "openapi": [d["name"] for d in change["openapi"]],
    }
    emit(args.json, shown, _created_words)
    return 0


def _created_words(data: dict[str, Any]) -> str:
    cid = data.get("candidate_id")
    documents = ", ".join(data["openapi"]) or "none changed"
    lines = [
        f"candidate {cid} created",
        f"  {data['subject']} in {data['environment']}: {short(data['base_revision'])}.."
        f"{short(data['revision'])}, {data['files']} files changed, OpenAPI documents: {documents}",
        f"  change context: {data.get('change_context')}",
        f"obligations ({len(data.get('obligations') or [])}):",
        obligation_lines(data.get("obligations") or []),
    ]
    if data.get("change_context") != "attested":
        lines.append(
            "note: a trusted CI publisher attests the change: `sentinel candidate attest` (publisher)"
        )
    lines.append(f"next: `sentinel plan propose {cid}`")
    return "\n".join(lines)


# ---- candidate attest ------------------------------------------------------------------------------------


def cmd_attest(args: argparse.Namespace) -> int:
    persona = load_persona(args)
    project = persona.project()
    reader, base, head, files, paths = _git_change(args)
    client = persona.client()
    candidate = read_candidate(client, project, args.candidate_id)
    for side, mine, theirs in (
        ("BASE", base, candidate.get("base_revision")),
        ("HEAD", head, candidate.get("revision")),
    ):
        if mine != theirs:
            # The candidate's base is its requester's choice (the agent's): a base later than the one this
            # pipeline trusts leaves commits out of the change. Never point CI at the candidate's range.
            raise CommandRefused(
                "REVISION_MISMATCH",
                f"{side} of {args.from_git} is {short(mine)}, the candidate's is {short(theirs)}",
                "check out the candidate's revision to attest it"
                if side == "HEAD"
                else "never attest the candidate's own base instead of the range this pipeline trusts (its "
                "requester chose it, and commits before it would go unexamined): the candidate holds "
                "unattested; a new commit gives a candidate whose base can be attested",
            )
    subject = str(candidate.get("subject") or "")
    change = _change(reader, base, head, files, read_config(client, project), subject, paths)
    with progress("posting the change context"):
        answer = client.add_change_context(project, args.candidate_id, change)
    added = body_of(answer, 201)
    shown = {**added, "candidate_id": args.candidate_id, "files": len(files)}
    emit(args.json, shown, _attested_words)
    return 0


def _attested_words(data: dict[str, Any]) -> str:
    added = data.get("added_obligations") or []
    lines = [
        f"change context of {data['candidate_id']} posted ({data['files']} files): "
        f"change context is now {data.get('change_context')}",
        f"obligations added ({len(added)}):" + ("" if added else " none"),
    ]
    if added:
        lines.append(obligation_lines(added))
    if data.get("change_context") != "attested":
        lines.append(
            "note: still not attested: only a ci principal with the publisher role that the project lists "
            "in change_context_publishers attests"
        )
    return "\n".join(lines)


# ---- candidate show --------------------------------------------------------------------------------------


def cmd_show(args: argparse.Namespace) -> int:
    persona = load_persona(args)
    candidate = read_candidate(persona.client(), persona.project(), args.candidate_id)
    emit(args.json, candidate, candidate_words)
    return 0


def candidate_words(c: dict[str, Any]) -> str:
    versions = c.get("plan_versions") or []
    lines = [
        f"candidate {c.get('candidate_id')}: {c.get('subject')} in {c.get('environment')}, "
        f"{short(c.get('base_revision'))}..{short(c.get('revision'))} ({c.get('revision')})",
        f"  created by {(c.get('created_by') or {}).get('id')} at {c.get('created_at')}; "
        f"change context {c.get('change_context')}",
        f"obligations ({len(c.get('obligations') or [])}):",
        obligation_lines(c.get("obligations") or []),
    ]
    changed = c.get("changed_files")
    if isinstance(changed, dict):  # kept by the service since issue 16; older gates do not show it
        files = [str(f) for f in changed.get("files") or []]
        more = int(changed.get("count") or len(files)) - len(files)
        lines.append(f"changed files ({changed.get('count')}):")
        lines += [f"  {f}" for f in files[:20]]
        if more > 0 or len(files) > 20:
            lines.append(f"  … and {more + max(0, len(files) - 20)} more")
    if versions:
        newest = versions[-1]
        lines.append(
            f"plan: version {newest.get('plan_version')} of {len(versions)}, digest {c.get('plan_digest')} "
            f"({newest.get('mode')}, by {who(newest.get('author'))})"
        )
    else:
        lines.append(f"plan: none yet (`sentinel plan propose {c.get('candidate_id')}`)")
    reviews = c.get("reviews") or []
    lines.append(f"reviews ({len(reviews)}):" + ("" if reviews else " none"))
    for review in reviews:
        current = "current plan" if review.get("plan_digest") == c.get("plan_digest") else "an older plan"
        reviewer, digest = who(review.get("reviewer")), short(review.get("plan_digest"))
        lines.append(
            f"  {review.get('decision')} by {reviewer} of {current} (digest {digest}), "
            f"expires {review.get('expires_at')}"
        )
    evidence = c.get("evidence") or []
    lines.append(f"evidence ({len(evidence)}):" + ("" if evidence else " none"))
    rows = [
        [
            str(e.get("evidence_id")),
            str(e.get("check_id")),
            str(e.get("outcome")),
            str(e.get("trust")),
            ", ".join(map(str, (e.get("binding") or {}).get("mismatches") or [])) or "-",
        ]
        for e in evidence
    ]
    if rows:
        lines.append(table(rows, ["EVIDENCE", "CHECK", "OUTCOME", "TRUST", "MISMATCHES"]))
    for e in evidence:
        failing = e.get("failing_tests")
        names = failing.get("names") if isinstance(failing, dict) else failing
        url = (e.get("source") or {}).get("url") if isinstance(e.get("source"), dict) else None
        if names:
            lines.append(f"  {e.get('evidence_id')} failed: {', '.join(map(str, names[:10]))}")
        if url:
            lines.append(f"  {e.get('evidence_id')} run: {url}")
    tasks = c.get("tasks") or []
    lines.append(f"tasks ({len(tasks)}):" + ("" if tasks else " none"))
    for task in tasks:
        attempts = task.get("attempts") or []
        last = attempts[-1] if attempts else {}
        state = "passes" if task.get("passes") else (last.get("recorded_status") or "not reported")
        settled = ", settled" if task.get("settled") else ""
        count = f"{len(attempts)} attempt" + ("" if len(attempts) == 1 else "s")
        lines.append(f"  {task.get('task_id')}: {state}{settled} ({count})")
    decision = c.get("last_decision")
    if isinstance(decision, dict):
        codes = sorted({str(f.get("code")) for f in decision.get("findings") or []})
        lines.append(
            f"last decision: {decision.get('decision')} as of {decision.get('as_of')}"
            + (f" ({', '.join(codes)})" if codes else "")
        )
    else:
        lines.append("last decision: none recorded")
    return "\n".join(lines)


# ---- registration ----------------------------------------------------------------------------------------


def candidate_id(text: str) -> str:
    """A candidate id as a command line takes it: one path segment, never `.`/`..` or blank."""
    if text in ("", ".", "..") or any(ord(c) < 0x21 or ord(c) == 0x7F or c == "/" for c in text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a candidate id (e.g. cand_01J…)")
    return text


def _git_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--from-git",
        required=True,
        metavar="BASE..HEAD",
        help="the commits of the change (BASE...HEAD: since their merge base)",
    )
    parser.add_argument("--repo", metavar="DIR", help="the clone to read (default: the working directory)")
    parser.add_argument(
        "--openapi",
        action="append",
        metavar="NAME=PATH",
        help="where a document a rule names lives in the clone (NAME=- : not in this repository)",
    )


def register(commands: Any) -> None:
    group = commands.group("candidate", help="create, show and attest candidates")
    create = group.add_parser(
        "create", help="create a candidate from git: changed files and OpenAPI documents between two commits"
    )
    _git_options(create)
    create.add_argument("--subject", help="what the change is about (default: the context's subject)")
    create.add_argument("--environment", help="where it would go (default: the context's environment)")
    add_persona_options(create)
    create.set_defaults(run=cmd_create)

    show = group.add_parser("show", help="a candidate's state in words")
    show.add_argument("candidate_id", metavar="ID", type=candidate_id)
    add_persona_options(show)
    show.set_defaults(run=cmd_show)

    attest = group.add_parser(
        "attest", help="(publisher) post the change context of the candidate's own commits, read from git"
    )
    attest.add_argument("candidate_id", metavar="ID", type=candidate_id)
    _git_options(attest)
    add_persona_options(attest)
    attest.set_defaults(run=cmd_attest)
