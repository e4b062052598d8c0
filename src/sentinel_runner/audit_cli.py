"""`sentinel audit verify` and `sentinel audit export`: the audit chains checked against the witness, by the
operator, with or without the service.

    sentinel audit verify --project P [--candidate C] [--data DIR | --dynamodb-endpoint URL]
    sentinel audit export --project P --out DIR [--data DIR | --dynamodb-endpoint URL]
    sentinel audit verify --from DIR [--chain-key-file F]

`verify` prints one JSON line per chain (the project's, then each candidate's, or the one named) with its
verification: the whole chain, every tag under the chain key, and the witness's newest checkpoint for it (a
chain the witness knows but the store has lost is a failure too). Exit 0: every chain verifies; 1: at least
one is tampered, and its line names the first bad seq; 2: the check could not be made (no store, no key, no
witness).

`export` writes what an auditor needs to check the chains with no access to the service: `chains/*.json`
(each chain's events, facts as stored, and head), `checkpoints.jsonl` (every checkpoint the witness holds for
the project's chains) and `tampered.jsonl` (its tamper findings). `verify --from DIR` checks them; with the
chain key (`--chain-key-file`) it checks every event's, head's and checkpoint's tag too, and says whether it
did (`authenticated`). The export is only as trustworthy as the witness it was read from: it carries no
signature of its own (in AWS, the witness's records are signed: see docs/failing-closed.md)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sentinel_domain.audit import AuditChain, Verification
from sentinel_domain.errors import StoreUnavailable
from sentinel_domain.integrity import ChainKeyUnavailable, ChainSeal, marked_tampered, verify_against_witness
from sentinel_domain.ports import StreamRef
from sentinel_service.adapters.principals import DirectoryUnavailable
from sentinel_service.adapters.token_key import TokenKeyUnavailable

from .data_dir import DataDirUnavailable
from .output import fail
from .stores import add_store_options, services_for

EXIT_VALID, EXIT_TAMPERED, EXIT_ERROR = 0, 1, 2
FAULTS = (
    StoreUnavailable,
    ChainKeyUnavailable,
    TokenKeyUnavailable,
    DataDirUnavailable,
    DirectoryUnavailable,
)


def _error(message: str, code: str = "STATE_UNAVAILABLE", next_step: str | None = None) -> int:
    """The check could not be made: one line and a next step, and this command's own exit code (2)."""
    return fail(code, message, next_step, exit_code=EXIT_ERROR)


def _line(ref: StreamRef, found: Verification, **more: Any) -> dict[str, Any]:
    return {"project": ref.project, "candidate_id": ref.candidate_id, **found.as_dict(), **more}


def _report(lines: Iterable[dict[str, Any]]) -> int:
    code = EXIT_VALID
    for line in lines:
        print(json.dumps(line, sort_keys=True), flush=True)
        if not line["valid"]:
            code = EXIT_TAMPERED
    return code


# ---- against the store and its witness ---------------------------------------------------------------------


def _chains(services: Any, project: str, candidate: str | None) -> list[StreamRef]:
    """The project's chain and its candidates' (every claim, and every chain the witness knows of): a chain
    the store lost but the witness remembers is checked too."""
    if candidate is not None:
        return [StreamRef(project, candidate)]
    refs = {StreamRef(project)}
    cursor: str | None = None
    while True:
        claims, cursor = services.store.list_claims(project, 500, cursor)
        refs.update(StreamRef(project, c["candidate_id"]) for c in claims)
        if cursor is None:
            break
    known = getattr(services.witness, "chains", None)
    if callable(known):
        refs.update(ref for ref in known() if ref.project == project)
    return sorted(refs, key=lambda r: (r.candidate_id is not None, r.candidate_id or ""))


def cmd_verify(args: argparse.Namespace) -> int:
    if args.source:
        return verify_export(Path(args.source), args.chain_key_file)
    if not args.project:
        return _error(
            "give --project P (or --from DIR for an export)",
            "SETTING_MISSING",
            "name the project: `sentinel audit verify --project P`",
        )
    try:
        services = services_for(args)
        seal = services.chain_seal()
        refs = _chains(services, args.project, args.candidate)
        lines = []
        for ref in refs:
            found = verify_against_witness(services.store, services.witness, ref, seal)
            newest = services.witness.newest(ref)
            lines.append(_line(ref, found, witness_seq=newest["seq"] if newest else 0))
    except FAULTS as error:
        return _error(str(error) or type(error).__name__)
    return _report(lines)


def cmd_export(args: argparse.Namespace) -> int:
    out = Path(args.out)
    try:
        services = services_for(args)
        refs = _chains(services, args.project, None)
        chains, checkpoints, marks = [], [], []
        for ref in refs:
            stream = services.store.load(ref)
            if stream is not None:
                chains.append(
                    {
                        "project": ref.project,
                        "candidate_id": ref.candidate_id,
                        "complete": stream.complete,
                        "events": stream.events,
                        "facts": {str(seq): text for seq, text in sorted(stream.facts.items())},
                        "head": stream.head,
                    }
                )
            every = getattr(services.witness, "checkpoints", None)
            held = every(ref) if callable(every) else [c for c in [services.witness.newest(ref)] if c]
            checkpoints.extend(held)
            mark = services.witness.tampered(ref)
            if mark is not None:
                marks.append({"project": ref.project, "candidate_id": ref.candidate_id, "finding": mark})
    except FAULTS as error:
        return _error(str(error) or type(error).__name__)
    (out / "chains").mkdir(parents=True, exist_ok=True)
    for index, chain in enumerate(chains):
        name = f"{index:06d}-{chain['candidate_id'] or 'project'}.json"
        (out / "chains" / name).write_text(json.dumps(chain, sort_keys=True, indent=1), encoding="utf-8")
    (out / "checkpoints.jsonl").write_text(
        "".join(json.dumps(c, sort_keys=True) + "\n" for c in checkpoints), encoding="utf-8"
    )
    (out / "tampered.jsonl").write_text(
        "".join(json.dumps(m, sort_keys=True) + "\n" for m in marks), encoding="utf-8"
    )
    print(json.dumps({"out": str(out), "chains": len(chains), "checkpoints": len(checkpoints)}))
    return EXIT_VALID


# ---- an export, offline ------------------------------------------------------------------------------------


def _jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if isinstance(record, dict):
            records.append(record)
    return records


def verify_export(source: Path, key_file: str | None) -> int:
    """Every exported chain against the newest exported checkpoint for it, with no service at all."""
    seal: ChainSeal | None = None
    try:
        if key_file:
            from sentinel_service.adapters.chain_key import read_key_file

            seal = ChainSeal(read_key_file(key_file))
        chains = [
            json.loads(p.read_text(encoding="utf-8")) for p in sorted((source / "chains").glob("*.json"))
        ]
        checkpoints = _jsonl(source / "checkpoints.jsonl")
        marks = _jsonl(source / "tampered.jsonl")
    except (OSError, ValueError, ChainKeyUnavailable) as error:
        return _error(f"cannot read the export in {source}: {error}")
    newest: dict[tuple[Any, Any], dict[str, Any]] = {}
    for checkpoint in checkpoints:
        if seal is not None and not seal.checkpoint_verifies(checkpoint):
            continue  # never the gate's: vouches for nothing (the chain it names is checked without it)
        chain = (checkpoint.get("project"), checkpoint.get("candidate_id"))
        if type(checkpoint.get("seq")) is int and checkpoint["seq"] > newest.get(chain, {}).get("seq", 0):
            newest[chain] = checkpoint
    found_marks = {(m.get("project"), m.get("candidate_id")): m.get("finding") or {} for m in marks}
    lines = []
    seen = set()
    for chain in chains:
        ref = StreamRef(chain["project"], chain.get("candidate_id"))
        key = (ref.project, ref.candidate_id)
        seen.add(key)
        facts = {int(seq): text for seq, text in chain.get("facts", {}).items()}
        found = AuditChain.verify(
            ref.project,
            ref.candidate_id,
            chain["events"],
            facts,
            chain.get("head"),
            newest.get(key),
            seal=seal,
        )
        if found.valid and key in found_marks:
            found = marked_tampered(found, found_marks[key])
        lines.append(_line(ref, found, authenticated=seal is not None))
    for key in sorted(newest, key=lambda k: (k[0], k[1] or "")):
        if key not in seen:  # the witness knows a chain the export does not hold: it was lost
            ref = StreamRef(key[0], key[1])
            lost = Verification(False, 0, None, 1, "the witness holds a checkpoint of a chain the store lost")
            lines.append(_line(ref, lost, authenticated=seal is not None))
    return _report(lines)


def add_audit_commands(audit: Any) -> None:
    """`verify` and `export`, beside `audit exposure`, in the `audit` command's subparsers."""
    verify = audit.add_parser("verify", help="verify chains against the witness; name the first bad seq")
    verify.add_argument("--project", help="the project whose chains to check")
    verify.add_argument("--candidate", help="only this candidate's chain")
    verify.add_argument("--from", dest="source", metavar="DIR", help="check an export instead of a store")
    verify.add_argument(
        "--chain-key-file", metavar="F", help="with --from: also check every tag under this chain key"
    )
    add_store_options(verify)
    verify.set_defaults(run=cmd_verify)
    export = audit.add_parser("export", help="write a project's chains and checkpoints for offline checks")
    export.add_argument("--project", required=True)
    export.add_argument("--out", required=True, metavar="DIR")
    add_store_options(export)
    export.set_defaults(run=cmd_export)
