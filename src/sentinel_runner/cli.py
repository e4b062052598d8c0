"""The server side of `sentinel`: the local runner and the operator's commands for projects and principals,
registered into the client's `sentinel` (sentinel_client.cli) through the `sentinel.commands` entry point.

Projects and principals are never managed through the API: these commands write the tables directly, with
the operator's own credentials (or the embedded store's), and record each change on the project chain."""

import argparse
import json
import sys
from typing import Any

from sentinel_client.cli import Commands
from sentinel_client.cli import main as client_main
from sentinel_client.cli_output import confirm, table
from sentinel_domain.errors import Refusal, StoreUnavailable
from sentinel_domain.integrity import ChainKeyUnavailable
from sentinel_domain.models import PROJECT_ID
from sentinel_service.adapters.principals import DirectoryUnavailable, PrincipalRefused
from sentinel_service.adapters.token_key import TokenKeyUnavailable
from sentinel_service.adapters.tokens import parse_duration

from . import apply_cli
from .audit_cli import add_audit_commands
from .data_dir import DataDirUnavailable
from .output import fail
from .receipt_cli import add_receipt_commands
from .serve import cmd_serve
from .stores import add_store_options, services_for

# ---- projects ----------------------------------------------------------------------------------------


def cmd_projects_create(args: argparse.Namespace) -> int:
    import re

    if not re.match(PROJECT_ID, args.id):
        return fail("VALIDATION_FAILED", f"a project id must match {PROJECT_ID}")
    operator = services_for(args).operator
    try:
        seq = operator.create_project(args.id, synthetic=args.synthetic)
    except Refusal as refusal:
        return fail(refusal.code, refusal.detail, "pick another id, or use the existing project")
    print(json.dumps({"project": args.id, "seq": seq, **({"synthetic": True} if args.synthetic else {})}))
    return 0


def cmd_projects_list(args: argparse.Namespace) -> int:
    projects = services_for(args).operator.list_projects()
    if args.json:
        print(json.dumps({"projects": projects}, sort_keys=True))
        return 0
    rows = [
        [
            p["project"],
            str(p["chain_length"]),
            "valid" if p["chain_valid"] else f"INVALID at seq {p['first_bad_seq']}",
            str(p["candidates"]),
            str(p["principals"])
            + (f" (+{p['revoked_principals']} revoked)" if p["revoked_principals"] else ""),
        ]
        for p in projects
    ]
    print(table(rows, ["PROJECT", "EVENTS", "CHAIN", "CANDIDATES", "PRINCIPALS"]) or "no projects")
    return 0


# ---- principals --------------------------------------------------------------------------------------


def _roles(args: argparse.Namespace) -> dict[str, list[str]]:
    projects, roles = args.project or [], args.role or []
    if len(projects) != len(roles):
        raise PrincipalRefused("VALIDATION_FAILED", "give --project and --role in pairs")
    out: dict[str, list[str]] = {}
    for project, role in zip(projects, roles, strict=True):
        out.setdefault(project, [])
        if role not in out[project]:
            out[project].append(role)
    return out


def cmd_principals(args: argparse.Namespace) -> int:
    services = services_for(args)
    operator = services.operator
    try:
        if args.action == "tag-legacy":
            return _tag_legacy(services, args)
        if args.action in ("add", "rotate"):
            ttl = parse_duration(args.ttl) if args.ttl else None
            if args.action == "rotate":
                confirm(f"rotate {args.id}'s token (the one it holds stops working now)", yes=args.yes)
                token = operator.rotate(args.id, ttl)
            else:
                token = operator.add_principal(args.id, args.kind, args.sponsor, _roles(args), ttl)
            # The token alone on standard output (for `> file`), or with its principal under --json.
            print(json.dumps({"principal_id": args.id, "token": token}) if args.json else token)
        elif args.action == "revoke":
            what = " as compromised: everything it approved, attested, published or requested stops counting"
            confirm(f"revoke {args.id}{what if args.compromised else ''}", yes=args.yes)
            print(json.dumps(operator.revoke(args.id, args.compromised)))
        else:
            listed = operator.list_principals(args.project_filter, args.kind_filter)
            if args.json:
                print(json.dumps({"principals": listed}, sort_keys=True))
            for principal in [] if args.json else listed:
                print(json.dumps(principal, sort_keys=True))
    except PrincipalRefused as refused:
        return fail(refused.code, refused.message)
    except ValueError as error:
        return fail("VALIDATION_FAILED", str(error), "durations look like 30m, 12h or 90d")
    return 0


def _tag_legacy(services: Any, args: argparse.Namespace) -> int:
    """Once, after upgrading a local data directory to schema 4: tag the principal rows written before, which
    are refused until then. The operator vouches for the rows as they stand (see sqlite_principals)."""
    from sentinel_service.adapters.sqlite_principals import SqlitePrincipalAdmin, tag_legacy_rows

    if not isinstance(services.admin, SqlitePrincipalAdmin):
        return fail("VALIDATION_FAILED", "only the local gate's database has untagged principal rows")
    confirm(
        "tag every principal row in this database as it stands now (only if nobody else could write it)",
        yes=args.yes,
    )
    print(json.dumps(tag_legacy_rows(services.admin.db, services.token_key()), sort_keys=True))
    return 0


# ---- audit -------------------------------------------------------------------------------------------


def cmd_audit_exposure(args: argparse.Namespace) -> int:
    operator = services_for(args).operator
    try:
        found = operator.exposure(args.principal)
    except PrincipalRefused as refused:
        return fail(refused.code, refused.message)
    if args.json:
        print(json.dumps({"principal_id": args.principal, "exposed": found}, sort_keys=True))
    for entry in [] if args.json else found:
        print(json.dumps(entry, sort_keys=True))
    print(
        f"{len(found)} recorded ready decision(s) relied on {args.principal}"
        + ("; treat their forge checks and receipts as exposed" if found else ""),
        file=sys.stderr,
    )
    return 0


# ---- serve -------------------------------------------------------------------------------------------


def cmd_eval(args: argparse.Namespace) -> int:
    from sentinel_evaluation.cli import run

    return run(args)


class _TopLevel:
    """`sub.add_parser` for helpers written against argparse's subparsers: adds a top-level command."""

    def __init__(self, commands: Commands) -> None:
        self.add_parser = commands.command


def register(commands: Commands) -> None:
    """The server's subcommands, into the client's `sentinel` (the `sentinel.commands` entry point)."""
    commands.translators.append(_translate)
    sub = _TopLevel(commands)
    serve = sub.add_parser("serve", help="run the local gate on 127.0.0.1")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=0, help="0 picks a free port (the first line says which)")
    add_store_options(serve, serve=True)
    serve.add_argument(
        "--seed", action="store_true", help="create the demo project and one principal per role"
    )
    serve.add_argument(
        "--event-log",
        help="append relayed outbox events and checkpoints to this JSON-lines file "
        "(default: events.jsonl in the data directory)",
    )
    serve.add_argument(
        "--rate",
        type=float,
        default=100.0,
        help="stage throttle per caller, requests a second (0 turns it off)",
    )
    serve.add_argument("--burst", type=int, default=200, help="stage throttle burst per caller")
    serve.set_defaults(run=cmd_serve)

    projects = commands.group("projects", help="manage projects")
    create = projects.add_parser("create", help="create a project and its chain")
    create.add_argument("--id", required=True)
    create.add_argument(
        "--synthetic",
        action="store_true",
        help="a synthetic project (the acceptance suite's): its side effects reach the event log or archive "
        "and no consumer; fixed at creation",
    )
    add_store_options(create)
    create.set_defaults(run=cmd_projects_create)
    listed = projects.add_parser(
        "list", help="every project: its chain (length, verification), candidates and principals"
    )
    listed.add_argument("--json", action="store_true", help="print one JSON document")
    add_store_options(listed)
    listed.set_defaults(run=cmd_projects_list)

    principals = commands.group("principals", help="manage principals")
    add = principals.add_parser("add", help="create a principal; prints its token alone")
    add.add_argument("--id", required=True)
    add.add_argument("--kind", required=True, choices=["human", "agent", "ci"])
    add.add_argument("--sponsor")
    add.add_argument("--project", action="append")
    add.add_argument("--role", action="append")
    add.add_argument("--ttl", help="token lifetime, e.g. 12h or 90d (defaults: human 12h, ci and agent 90d)")
    rotate = principals.add_parser("rotate", help="issue a new token; the old one stops working")
    rotate.add_argument("--id", required=True)
    rotate.add_argument("--ttl")
    revoke = principals.add_parser("revoke", help="revoke a principal")
    revoke.add_argument("--id", required=True)
    revoke.add_argument(
        "--compromised",
        action="store_true",
        help="also withdraw everything it approved, attested, published or requested, on every candidate, "
        "from now on (see `audit exposure` for what it already released)",
    )
    listing = principals.add_parser("list", help="list principals (never tokens), one JSON object a line")
    listing.add_argument(
        "--project", dest="project_filter", metavar="P", help="only those holding a role in project P"
    )
    listing.add_argument(
        "--kind", dest="kind_filter", choices=["human", "agent", "ci"], help="only those of this kind"
    )
    tag_legacy = principals.add_parser(
        "tag-legacy",
        help="once, after upgrading a local data directory: tag the principal rows written before "
        "(refused until then), vouching for them as they stand",
    )
    for destructive in (rotate, revoke, tag_legacy):
        destructive.add_argument("--yes", action="store_true", help="do it without asking (no terminal)")
    for sp in (add, rotate, revoke, listing, tag_legacy):
        add_store_options(sp)
        sp.set_defaults(run=cmd_principals)
    for sp in (create, add, rotate, revoke, listing):
        if not any("--json" in action.option_strings for action in sp._actions):
            sp.add_argument("--json", action="store_true", help="print one JSON document")

    audit = commands.group("audit", help="audit what the gate recorded")
    exposure = audit.add_parser(
        "exposure",
        help="list the recorded ready decisions that relied on a principal (one JSON object a line)",
    )
    exposure.add_argument("--principal", required=True, metavar="ID")
    exposure.add_argument("--json", action="store_true", help="print one JSON document")
    add_store_options(exposure)
    exposure.set_defaults(run=cmd_audit_exposure)
    add_audit_commands(audit)
    add_receipt_commands(sub)
    apply_cli.register(commands)

    # The harness is imported only when it runs: a packaged runner carries `local` without `evaluation`.
    evaluate = sub.add_parser("eval", help="replay the scenario catalog twice through the real handlers")
    evaluate.add_argument("--json", action="store_true", help="print the report as JSON instead of text")
    evaluate.add_argument(
        "--scenario",
        action="append",
        metavar="NAME",
        help="run only this scenario (repeatable); the catalog-wide gates are skipped",
    )
    evaluate.add_argument("--report", metavar="FILE", help="also write the JSON report to FILE")
    evaluate.add_argument(
        "--store",
        choices=["memory", "sqlite"],
        default="memory",
        help="back every run with this store: in memory (default) or SQLite files in a temporary directory; "
        "the report and its digest do not depend on it",
    )
    evaluate.set_defaults(run=cmd_eval)


_UNAVAILABLE = (
    DataDirUnavailable,
    StoreUnavailable,
    TokenKeyUnavailable,
    ChainKeyUnavailable,
    DirectoryUnavailable,
)


def _translate(error: BaseException) -> tuple[str, str, str | None] | None:
    """What the server's exceptions mean, for the client's `sentinel` to say in one line (a next step of
    None is the client's for the code)."""
    if isinstance(error, Refusal):
        hints = [f.get("remediation_hint") for f in error.findings if isinstance(f, dict)]
        return error.code, error.detail, next((h for h in hints if h), None)
    if isinstance(error, _UNAVAILABLE):
        return "STATE_UNAVAILABLE", str(error) or type(error).__name__, None
    if isinstance(error, argparse.ArgumentTypeError):
        return "VALIDATION_FAILED", str(error), None
    return _translate_aws(error)


# AWS's error codes that mean "who you are did not check out", rather than "the store said no".
_AWS_CREDENTIAL_CODES = frozenset(
    {
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "SignatureDoesNotMatch",
    }
)


def _translate_aws(error: BaseException) -> tuple[str, str, str | None] | None:
    """botocore's failures (an operator command against DynamoDB or a deployed stack): no credentials, an
    endpoint that does not answer, or AWS's refusal, each as one line. botocore is imported only when an
    error is being explained: the client's commands never load it."""
    if type(error).__module__.partition(".")[0] != "botocore":
        return None
    from botocore import exceptions as aws

    said = " ".join(str(error).split())
    if isinstance(error, aws.NoCredentialsError | aws.PartialCredentialsError | aws.CredentialRetrievalError):
        return "CREDENTIALS_UNAVAILABLE", f"no usable AWS credentials: {said}", None
    if isinstance(error, aws.NoRegionError):
        return "CREDENTIALS_UNAVAILABLE", said, "name the stack's region with --aws-region"
    if isinstance(error, aws.ProfileNotFound):
        return "CREDENTIALS_UNAVAILABLE", said, "set AWS_PROFILE to a profile of ~/.aws/config"
    if isinstance(error, aws.ClientError):
        details = error.response.get("Error", {})
        code, message = str(details.get("Code", "")), str(details.get("Message", said))
        if code in _AWS_CREDENTIAL_CODES:
            return "CREDENTIALS_UNAVAILABLE", f"AWS refused the credentials ({code}): {message}", None
        if code.startswith("AccessDenied"):
            return (
                "ACCESS_DENIED",
                f"AWS refused ({code}): {message}",
                "use a role with the operator's permissions on the stage's tables and token key",
            )
        if code == "ValidationError" and "does not exist" in message:
            return (
                "STACK_NOT_FOUND",
                message,
                "check --aws-stage and --aws-region (the stack: Sentinel-STAGE)",
            )
        return "STATE_UNAVAILABLE", f"AWS said {code}: {message}", None
    return "STATE_UNAVAILABLE", f"the store did not answer: {said}", None


def main(argv: list[str] | None = None) -> int:
    """`sentinel` with the client's commands and these (what the installed script runs, minus other
    registrations)."""
    return client_main(argv, registrations=[register])


if __name__ == "__main__":
    sys.exit(main())
