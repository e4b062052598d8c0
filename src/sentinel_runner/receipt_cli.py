"""`sentinel keys` and `sentinel receipt verify`: the public key receipts are signed with, and the offline
check a deploy step runs before it deploys a commit (docs/receipts.md).

    sentinel keys [--data DIR | --url URL] [--json]
    sentinel receipt verify FILE --revision R --project P --environment E [--subject S] [--key FILE]
        [--at TIME]

`keys` prints the public key as PEM (what `--key` reads): the local data directory's by default, or the ones a
gate publishes at GET /v1/keys (`--url`, https unless loopback). `--json` prints GET /v1/keys's body instead,
which `--key` reads too (then a receipt's key id must be one of its keys).

`receipt verify` reads a receipt (the `receipt` object of a POST .../decisions answer; `-` for standard
input) and checks, without calling the service: the signature under the key (`--key`, else the data
directory's), then the commit, the project, the subject (`--subject`, when given), the environment, that it
records `ready`, and that it has not expired at `--at` (default: now). Exit 0 and one line on standard output
when every check passes; exit 1 and `error: RECEIPT_<REASON>: ...` on standard error on the first
that fails."""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import sys
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sentinel_domain.receipts import (
    MAX_RECEIPT_BYTES,
    ReceiptRefused,
    ReceiptSignerUnavailable,
    verify_receipt,
)
from sentinel_domain.times import format_time, parse_time

from .data_dir import RECEIPT_KEY, default_data_dir, open_data_dir
from .output import fail

KEYS_PATH = "/v1/keys"


class InsecureUrl(ValueError):
    """A gate's URL a key list must not be fetched from (plain http off loopback)."""


TIMEOUT_SECONDS = 10


def _local_signer(args: argparse.Namespace, create: bool) -> Any:
    from sentinel_service.adapters.receipt_signer import FileReceiptSigner

    # An explicit --data wins over the environment: a deploy script that names a directory gets its key.
    if not args.data and os.environ.get("SENTINEL_RECEIPT_KEY_FILE"):
        return FileReceiptSigner(os.environ["SENTINEL_RECEIPT_KEY_FILE"], create=create)
    data = open_data_dir(Path(args.data) if args.data else default_data_dir())
    return FileReceiptSigner(str(data.path / RECEIPT_KEY), create=create)


def _fetch_keys(url: str) -> dict[str, Any]:
    parts = urlsplit(url)
    loopback = False
    try:
        loopback = ipaddress.ip_address(parts.hostname or "").is_loopback
    except ValueError:
        loopback = parts.hostname == "localhost"
    if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
        raise InsecureUrl("the gate's URL must be https (http only for a loopback address)")
    with urllib.request.urlopen(url.rstrip("/") + KEYS_PATH, timeout=TIMEOUT_SECONDS) as answer:
        body: dict[str, Any] = json.loads(answer.read(MAX_RECEIPT_BYTES))
    if not isinstance(body.get("keys"), list):
        raise ValueError("the gate's answer is not a key list")
    return body


def cmd_keys(args: argparse.Namespace) -> int:
    from sentinel_service.adapters.receipt_signer import key_entry

    try:
        document = _fetch_keys(args.url) if args.url else {"keys": [key_entry(_local_signer(args, True))]}
    except ReceiptSignerUnavailable as error:
        return fail("STATE_UNAVAILABLE", str(error), "check the data directory's receipt.key")
    except urllib.error.HTTPError as error:
        return fail("BAD_RESPONSE", f"the gate answered HTTP {error.code} to GET {KEYS_PATH}")
    except urllib.error.URLError as error:
        return fail("UNREACHABLE", f"cannot reach {args.url}: {error.reason}")
    except InsecureUrl as error:
        return fail("INSECURE_URL", str(error))
    except (OSError, ValueError) as error:
        return fail("STATE_UNAVAILABLE", f"cannot read the gate's keys: {error}")
    if args.json:
        print(json.dumps(document, sort_keys=True))
        return 0
    if not document["keys"]:
        return fail("RECEIPT_KEY_UNKNOWN", "the gate publishes no receipt key")
    for key in document["keys"]:
        print(f"# key_id: {key['key_id']} ({key['algorithm']})", file=sys.stderr)
        print(str(key["public_key"]).strip())
    return 0


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read(MAX_RECEIPT_BYTES + 1)
    with open(path, encoding="utf-8") as handle:
        return handle.read(MAX_RECEIPT_BYTES + 1)


def _check(args: argparse.Namespace) -> Any:
    from sentinel_service.adapters.receipt_signer import read_keys, signature_check

    if args.key:
        try:
            keys = read_keys(_read(args.key))
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise ReceiptRefused("RECEIPT_KEY_UNKNOWN", f"cannot read the key {args.key}: {error}") from None
    else:
        try:
            signer = _local_signer(args, False)
            keys = {signer.key_id: signer.public_key_pem()}
        except ReceiptSignerUnavailable as error:
            raise ReceiptRefused("RECEIPT_KEY_UNKNOWN", f"no local receipt key: {error}") from None
    return signature_check(keys)


def cmd_receipt_verify(args: argparse.Namespace) -> int:
    try:
        at = format_time(parse_time(args.at) if args.at else datetime.now(UTC))
    except (ValueError, OverflowError):
        return fail("VALIDATION_FAILED", f"--at {args.at!r} is not an RFC 3339 instant with an offset")
    try:
        try:
            text = _read(args.file)
        except (OSError, UnicodeDecodeError) as error:
            raise ReceiptRefused("RECEIPT_MALFORMED", f"cannot read {args.file}: {error}") from None
        if len(text) > MAX_RECEIPT_BYTES:
            raise ReceiptRefused("RECEIPT_MALFORMED", f"a receipt is at most {MAX_RECEIPT_BYTES} bytes")
        try:
            receipt = json.loads(text)
        except ValueError:
            raise ReceiptRefused("RECEIPT_MALFORMED", f"{args.file} is not JSON") from None
        statement = verify_receipt(
            receipt, _check(args), args.revision, args.project, args.environment, at, args.subject
        )
    except ReceiptRefused as refused:
        return fail(refused.code, refused.detail, "deploy only a commit whose recorded decision is ready")
    predicate = statement["predicate"]
    print(
        f"ok: {predicate['revision']} is ready for {predicate['project']}/{predicate['environment']} "
        f"(candidate {predicate['candidate_id']}, recorded {predicate['recorded_at']}, "
        f"valid until {predicate['expires_at']})"
    )
    return 0


def add_receipt_commands(sub: Any) -> None:
    keys = sub.add_parser("keys", help="print the public key decision receipts are signed with (PEM)")
    where = keys.add_mutually_exclusive_group()
    where.add_argument("--data", metavar="DIR", help="the local gate's data directory (default: as serve)")
    where.add_argument("--url", metavar="URL", help="a gate's base URL: read its GET /v1/keys")
    keys.add_argument("--json", action="store_true", help="print GET /v1/keys's JSON instead of PEM")
    keys.set_defaults(run=cmd_keys)

    receipt = sub.add_parser("receipt", help="check decision receipts offline").add_subparsers(
        dest="action", required=True
    )
    verify = receipt.add_parser(
        "verify", help="check a receipt's signature, commit, project, environment and expiry; exit 0 if valid"
    )
    verify.add_argument("file", metavar="FILE", help="the receipt (the DSSE envelope); - for standard input")
    verify.add_argument("--revision", required=True, metavar="R", help="the commit being deployed")
    verify.add_argument("--project", required=True, metavar="P")
    verify.add_argument("--environment", required=True, metavar="E")
    verify.add_argument(
        "--subject",
        metavar="S",
        help="the subject being deployed; name it whenever one repository holds several subjects",
    )
    verify.add_argument(
        "--key",
        metavar="FILE",
        help="the public key: PEM, or `sentinel keys --json` output (default: the data directory's key)",
    )
    verify.add_argument("--data", metavar="DIR", help="the data directory whose key to use without --key")
    verify.add_argument(
        "--at", metavar="TIME", help="check the expiry at this RFC 3339 instant (default: now)"
    )
    verify.set_defaults(run=cmd_receipt_verify)
