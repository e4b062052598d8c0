"""Where a person's commands go and as whom: named contexts in the user's config, a token from a file or the
environment, and `sentinel login`, `sentinel context`, `sentinel whoami`.

One settings loader, two trust levels. The persona commands honour the user's config (this module: flags,
then `SENTINEL_*` variables, then the context, then `~/.config/sentinel/client.json`); the hook never does
(it reads only the root-owned managed file, sentinel_client.managed_settings), because an agent can write
the user's config but not the managed file.

The contexts file is `~/.config/sentinel/contexts.json` (`$XDG_CONFIG_HOME` when set):

    {"current": "staging", "contexts": {"staging": {"url": "...", "project": "...", "subject": "...",
     "environment": "...", "token_file": "/abs/path"}}}

A token given on standard input to `sentinel login` is kept in `tokens/<context>` beside it, mode 0600; the
contexts file never holds a token.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .api import Response, SentinelClient
from .cli_output import CommandRefused, emit, table
from .settings import (
    ENV_PREFIX,
    ClientConfigError,
    ClientSettings,
    check_url,
    load_settings,
    parse_timeout,
    read_json_object,
    read_token,
)

CONTEXT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
CONTEXT_KEYS = ("url", "project", "subject", "environment", "token_file")


def gate_url(value: str) -> str:
    """The gate's base URL as the client wants it (the client adds `/v1`): a pasted `…/v1` is accepted."""
    url = check_url(value)
    return url[: -len("/v1")] if url.endswith("/v1") else url


def config_dir(environ: dict[str, str] | os._Environ[str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CONFIG_HOME", "").strip()
    if base and Path(base).is_absolute():
        return Path(base) / "sentinel"
    return Path.home() / ".config" / "sentinel"


def contexts_path() -> Path:
    return config_dir() / "contexts.json"


def read_contexts() -> dict[str, Any]:
    path = contexts_path()
    data = read_json_object(path)
    if data is None:
        return {"current": None, "contexts": {}}
    contexts = data.get("contexts")
    if not isinstance(contexts, dict) or not all(
        isinstance(body, dict) and set(body) <= set(CONTEXT_KEYS) for body in contexts.values()
    ):
        raise ClientConfigError(
            "CONFIG_INVALID", f"{path} must hold {{current, contexts: {{name: {{...}}}}}}"
        )
    current = data.get("current")
    return {"current": current if isinstance(current, str) else None, "contexts": contexts}


def write_contexts(data: dict[str, Any]) -> Path:
    """Replace the contexts file at once (never half-written), readable by its owner alone (0600, in a 0700
    directory): it names where the user's token files are. Only the CONTEXT_KEYS are kept, so a token
    never reaches it."""
    path = contexts_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.parent.chmod(0o700)  # mkdir's mode is masked by the umask, and an existing directory keeps its own
    kept = {
        "current": data.get("current"),
        "contexts": {
            name: {key: body[key] for key in CONTEXT_KEYS if key in body}
            for name, body in data.get("contexts", {}).items()
        },
    }
    scratch = path.with_suffix(".json.tmp")
    scratch.unlink(missing_ok=True)  # a leftover of an interrupted write: O_EXCL below makes it anew, 0600
    descriptor = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(kept, indent=2, sort_keys=True) + "\n")
    os.replace(scratch, path)
    return path


@dataclass
class Persona:
    """The settings one command runs with, and the client built from them."""

    settings: ClientSettings
    context: str | None
    token: str | None

    def client(self) -> SentinelClient:
        self.settings.require("url")
        if self.token is None:
            raise ClientConfigError(
                "TOKEN_UNAVAILABLE",
                "no token: run `sentinel login`, or set SENTINEL_TOKEN_FILE or SENTINEL_TOKEN",
            )
        return SentinelClient(
            self.settings.url or "", token=self.token, timeout=self.settings.timeout_seconds
        )

    def project(self) -> str:
        self.settings.require("project")
        return self.settings.project or ""


def add_persona_options(parser: argparse.ArgumentParser) -> None:
    """The options every persona command shares (flags win over the environment, the context and the file)."""
    group = parser.add_argument_group("where and as whom")
    group.add_argument("--context", metavar="NAME", help="use this saved context (default: the current one)")
    group.add_argument("--url", help="the gate's base URL (e.g. https://gate.example.com)")
    group.add_argument("--project", help="the project")
    group.add_argument("--token-file", metavar="FILE", help="read the bearer token from FILE")
    group.add_argument("--timeout", type=float, metavar="SECONDS", help="per request (default 10)")
    parser.add_argument("--json", action="store_true", help="print one JSON document for machines")


def load_persona(args: argparse.Namespace) -> Persona:
    """Flags, then SENTINEL_* variables, then the named (or current) context, then client.json."""
    settings = load_settings()
    environ = os.environ
    store = read_contexts()
    name = getattr(args, "context", None) or environ.get(ENV_PREFIX + "CONTEXT") or store["current"]
    if name is not None and name not in store["contexts"]:
        raise ClientConfigError("CONTEXT_UNKNOWN", f"there is no context named {name!r}")
    context = store["contexts"].get(name, {}) if name else {}
    for key in CONTEXT_KEYS:
        from_env = environ.get(ENV_PREFIX + key.upper(), "").strip()
        if not from_env and context.get(key):
            value = context[key]
            setattr(settings, key, gate_url(value) if key == "url" else value)
    for key in ("url", "project", "token_file"):  # flags win; the URL is checked below with the rest
        value = getattr(args, key, None)
        if value:
            setattr(settings, key, value)
    for key in ("subject", "environment"):
        value = getattr(args, key, None)
        if isinstance(value, str) and value:
            setattr(settings, key, value)
    if getattr(args, "timeout", None) is not None:
        settings.timeout_seconds = parse_timeout(args.timeout)
    if settings.url:
        # Whatever set it (flag, SENTINEL_URL, context, client.json), `…/v1` names the same gate.
        settings.url = gate_url(settings.url)
    token = _token(settings, environ, explicit_file=bool(getattr(args, "token_file", None)))
    return Persona(settings=settings, context=name, token=token)


def _token(settings: ClientSettings, environ: Any, *, explicit_file: bool) -> str | None:
    """The token, in the same order as every other setting: --token-file, then SENTINEL_TOKEN_FILE, then
    SENTINEL_TOKEN, then the context's (or client.json's) token file."""
    if explicit_file or environ.get(ENV_PREFIX + "TOKEN_FILE", "").strip():
        return read_token(settings)
    from_env = environ.get(ENV_PREFIX + "TOKEN", "").strip()
    if from_env:
        if any(ord(character) < 0x21 or ord(character) == 0x7F for character in from_env):
            raise ClientConfigError("TOKEN_UNAVAILABLE", "SENTINEL_TOKEN does not hold a single token")
        return from_env
    if settings.token_file:
        return read_token(settings)
    return None


def body_of(response: Response, *ok: int) -> Any:
    """The body of an answer with one of the `ok` statuses (any 2xx when none is named); a refusal raises
    CommandRefused with the service's code and detail, and its remediation as the next step."""
    if (response.status in ok) if ok else response.ok:
        return response.body
    body = response.body if isinstance(response.body, dict) else {}
    code = response.code or {401: "UNAUTHORIZED", 403: "FORBIDDEN"}.get(
        response.status, f"HTTP_{response.status}"
    )
    detail = body.get("detail") or body.get("message") or body.get("title") or f"HTTP {response.status}"
    hint = body.get("remediation") or body.get("remediation_hint")
    if not hint:
        hints = [f.get("remediation_hint") for f in body.get("findings") or [] if isinstance(f, dict)]
        hint = next((h for h in hints if h), None)
    exit_code = 3 if response.status in (502, 503, 504) else None
    raise CommandRefused(code, str(detail), next_step=hint, exit_code=exit_code)


# ---- commands -------------------------------------------------------------------------------------------


def cmd_login(args: argparse.Namespace) -> int:
    name = args.name
    if not CONTEXT_NAME.match(name):
        raise CommandRefused(
            "VALIDATION_FAILED", "a context name is letters, digits, '.', '_' or '-' (at most 64)"
        )
    store = read_contexts()
    body: dict[str, Any] = dict(store["contexts"].get(name, {}))
    body["url"] = gate_url(args.url) if args.url else body.get("url")
    if not body.get("url"):
        raise CommandRefused("SETTING_MISSING", "a new context needs --url")
    for key in ("project", "subject", "environment"):
        if getattr(args, key, None):
            body[key] = getattr(args, key)
    token: str | None = None
    if args.token_stdin:
        token = sys.stdin.readline().strip()
        if not token or any(ord(c) < 0x21 or ord(c) == 0x7F for c in token):
            raise CommandRefused("TOKEN_UNAVAILABLE", "standard input did not hold a single token")
    elif args.token_file:
        path = Path(args.token_file).expanduser()
        body["token_file"] = str(path if path.is_absolute() else path.resolve())
    if token is None and body.get("token_file"):
        token = read_token(ClientSettings(token_file=body["token_file"]))
    settings = ClientSettings(url=body["url"])
    # The token is checked before anything is saved: a refused login leaves the config as it was.
    who = body_of(Persona(settings=settings, context=name, token=token).client().whoami(), 200)
    if args.token_stdin and token is not None:
        body["token_file"] = str(_save_token(name, token))
    body = {key: value for key, value in body.items() if value}
    store["contexts"][name] = body
    store["current"] = name
    where = write_contexts(store)
    emit(args.json, {"context": name, "saved_to": str(where), "whoami": who}, lambda d: _login_words(d))
    return 0


def _save_token(name: str, token: str) -> Path:
    tokens = config_dir() / "tokens"
    for directory in (tokens.parent, tokens):
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        directory.chmod(0o700)
    target = tokens / name
    descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)  # a file that was there keeps its mode through O_CREAT
    with os.fdopen(descriptor, "w") as handle:
        handle.write(token + "\n")
    return target


def _login_words(data: dict[str, Any]) -> str:
    who = data["whoami"]
    return f"logged in as {who.get('principal_id')} ({who.get('kind')}); context {data['context']} is current"


def cmd_whoami(args: argparse.Namespace) -> int:
    persona = load_persona(args)
    who = body_of(persona.client().whoami(), 200)

    def words(body: dict[str, Any]) -> str:
        roles = body.get("roles") or {}
        lines = [f"{body.get('principal_id')} ({body.get('kind')})"]
        if body.get("sponsor"):
            lines[0] += f", sponsored by {body['sponsor']}"
        lines += [f"  {project}: {', '.join(r)}" for project, r in sorted(roles.items())]
        return "\n".join(lines)

    emit(args.json, who, words)
    return 0


def cmd_context(args: argparse.Namespace) -> int:
    store = read_contexts()
    if args.action == "use":
        if args.name not in store["contexts"]:
            raise CommandRefused("CONTEXT_UNKNOWN", f"there is no context named {args.name!r}")
        store["current"] = args.name
        write_contexts(store)
        emit(args.json, {"current": args.name}, f"context {args.name} is current")
    elif args.action == "list":
        rows = [
            ["*" if name == store["current"] else "", name, body.get("url", ""), body.get("project", "")]
            for name, body in sorted(store["contexts"].items())
        ]
        emit(
            args.json,
            store,
            table(rows, ["", "NAME", "URL", "PROJECT"]) or "no contexts: run `sentinel login`",
        )
    else:
        persona = load_persona(args)
        shown = {key: getattr(persona.settings, key) for key in CONTEXT_KEYS}
        shown["context"] = persona.context
        shown["token"] = "set" if persona.token else None
        emit(args.json, shown, lambda d: "\n".join(f"{k}: {v}" for k, v in sorted(d.items())))
    return 0


def register(commands: Any) -> None:
    login = commands.command("login", help="save a context (URL, project, token) and check it with whoami")
    login.add_argument("--name", default="default", help="the context's name (default: default)")
    login.add_argument("--url", help="the gate's base URL, e.g. https://gate.example.com")
    login.add_argument("--project")
    login.add_argument("--subject", help="the subject your candidates are about (e.g. payments-api)")
    login.add_argument("--environment", help="the environment your candidates target")
    tokens = login.add_mutually_exclusive_group()
    tokens.add_argument(
        "--token-file", metavar="FILE", help="the file that holds your token (kept as a path)"
    )
    tokens.add_argument("--token-stdin", action="store_true", help="read the token from standard input")
    login.add_argument("--json", action="store_true")
    login.set_defaults(run=cmd_login)

    whoami = commands.command("whoami", help="who the gate says you are, and your roles per project")
    add_persona_options(whoami)
    whoami.set_defaults(run=cmd_whoami)

    context = commands.group("context", help="saved contexts (where commands go, as whom)")
    for action, text in (("list", "list saved contexts"), ("show", "the settings a command would use")):
        sub = context.add_parser(action, help=text)
        add_persona_options(sub)
        sub.set_defaults(run=cmd_context, action=action)
    use = context.add_parser("use", help="make a saved context the current one")
    use.add_argument("name")
    use.add_argument("--json", action="store_true")
    use.set_defaults(run=cmd_context, action="use")
