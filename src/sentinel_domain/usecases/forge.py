"""The forge, not the agent, says what changed: GitHub's webhook deliveries are received, recorded, and turned
into candidates attested from GitHub's own API by the forge worker.

Two halves, apart on purpose:
- `receive_webhook` answers the anonymous webhook route fast and never calls GitHub: the signature is checked
  before anything is parsed, the delivery is matched to exactly one project through the repository index
  (`ForgeIndex`, claimed by the project's configuration write), and recorded as a one-fact chain of its own
  (`dlv_<SHA-256 of the signed body>`) whose outbox item carries it to the worker. Creating that chain is
  conditional, so a replayed delivery finds it and appends nothing ("duplicate"). It is keyed on the signed
  bytes, not on the `X-GitHub-Delivery` header, which the signature does not cover: a captured body resent
  under a fresh delivery id is the same chain. One chain per delivery keeps the project chain, which every
  write reads whole, from growing with every push.
- `handle_delivery` (the worker, fed by the outbox) asks the `Forge` for the changed files and the OpenAPI
  documents at both commits and creates the candidates as the app's `ci` principal. A forge that cannot answer
  raises ForgeUnavailable before anything is written: the outbox retries it later.

Who acts: the app's principal creates (and, when the file list is complete, attests); the pull request's
author, mapped through `github.logins`, is the requester of record and cannot approve the plan
(sentinel_domain.reviews). Nothing in an HTTP body can name either: only a verified delivery does."""

from collections.abc import Callable
from hashlib import sha256
from typing import Any, Literal

from pydantic import ValidationError

from ..errors import Refusal, StoreConflict, StoreUnavailable
from ..forge import Forge, ForgeDocument, ForgeRefused
from ..models import (
    Actor,
    CandidateRequest,
    Change,
    ChangeContextRequest,
    GitHubForge,
    GitHubRepository,
    OpenApiChange,
    ProjectConfig,
)
from ..outcomes import Outcome
from ..ports import ForgeIndex, Stream, StreamRef
from ..webhooks import (
    IGNORED_CANDIDATE,
    IGNORED_REPOSITORY,
    Delivery,
    Ignored,
    forge_index_key,
    parse_delivery,
    signature_valid,
)
from .candidates import add_change_context, create_candidate
from .chain import Chain, CommitRequest, unavailable

DELIVERY_CHAIN_PREFIX = "dlv_"
OUTBOX_FORGE_DELIVERY = "forge_delivery"  # a recorded delivery, for the forge worker
OUTBOX_FORGE_CHECK = "forge_check"  # a candidate whose check run the check publisher (re)publishes
MAX_FILES = 20000  # what one change context carries (models.Change): a longer list is not complete


class WebhookReceived(Outcome):
    """The webhook's answer: `accepted` (recorded for the worker), `duplicate` (recorded before: nothing
    written) or `ignored` (nothing written; `code` says why)."""

    status: Literal["accepted", "duplicate", "ignored"]
    code: str | None
    detail: str
    delivery_id: str
    event: str
    action: str
    project: str | None


class ForgeHandled(Outcome):
    """What the worker did with one delivery. `publish` names the candidates whose check the publisher should
    (re)publish; `skipped` is a code when the delivery changed nothing."""

    project: str
    delivery_id: str
    event: str
    created: list[str]
    existing: list[str]
    attested: bool | None
    complete: bool | None
    publish: list[str]
    skipped: str | None = None


# ---- the repository index -----------------------------------------------------------------------------


def claim_repositories(chain: Chain, project: str, github: GitHubForge) -> None:
    """Before a configuration naming repositories is written: each must be this project's in the index, or
    free (then it becomes this project's). One claimed by another project is refused, whatever that project's
    configuration says now: moving a repository between projects is an operator's act."""
    index = chain.store
    if not isinstance(index, ForgeIndex):
        raise unavailable("this store keeps no repository index: a GitHub configuration cannot be written")
    for repo in github.repositories:
        key = forge_index_key(github.installation_id, repo.repository)
        try:
            owner = index.forge_claim(key, project)
        except StoreUnavailable as error:
            raise unavailable("the repository index could not be written; nothing was changed") from error
        if owner != project:
            raise Refusal(
                "FORGE_REPOSITORY_CLAIMED",
                f"repository {repo.repository} (installation {github.installation_id}) belongs to another "
                "project; nothing was changed",
            )


def _repository(config: ProjectConfig | None, delivery: Delivery) -> GitHubRepository | None:
    github = config.github if config is not None else None
    if github is None or github.installation_id != delivery.installation_id:
        return None
    wanted = delivery.repository.lower()
    return next((r for r in github.repositories if r.repository.lower() == wanted), None)


# ---- receiving ----------------------------------------------------------------------------------------


def _ignored(
    found: Ignored | Delivery, code: str, detail: str, project: str | None = None
) -> WebhookReceived:
    return WebhookReceived(
        status="ignored",
        code=code,
        detail=detail,
        delivery_id=found.delivery_id,
        event=found.event,
        action=found.action,
        project=project,
    )


def receive_webhook(
    chain: Chain,
    secret: Callable[[], bytes],
    event: str | None,
    delivery_id: str | None,
    signature: str | None,
    body: bytes,
) -> WebhookReceived:
    """One delivery to the webhook route. The signature first (401 WEBHOOK_SIGNATURE_INVALID, nothing read);
    then the headers and body (400 WEBHOOK_MALFORMED, 422 WEBHOOK_PAYLOAD_INVALID); then the project. Never
    calls the forge."""
    try:
        key = secret()
    except Exception as error:  # a secret that cannot be read verifies nothing
        raise unavailable(
            f"the webhook secret cannot be read ({type(error).__name__}); nothing recorded"
        ) from None
    if not signature_valid(key, body, signature):
        raise Refusal(
            "WEBHOOK_SIGNATURE_INVALID",
            "X-Hub-Signature-256 is missing or is not this body's HMAC-SHA256 under the webhook secret",
        )
    found = parse_delivery(event, delivery_id, body)
    if isinstance(found, Ignored):
        return _ignored(found, found.code, found.detail)
    index = chain.store
    if not isinstance(index, ForgeIndex):
        raise unavailable("this store keeps no repository index")
    try:
        project = index.forge_owner(forge_index_key(found.installation_id, found.repository))
    except StoreUnavailable as error:
        raise unavailable("the repository index could not be read; retry the delivery") from error
    unknown = f"no project takes {found.repository} from installation {found.installation_id}"
    if project is None:
        return _ignored(found, IGNORED_REPOSITORY, unknown)
    _pstream, pstate = chain.project(project)
    config = pstate.config()
    repo = _repository(config, found)
    if config is None or config.github is None or repo is None:
        return _ignored(found, IGNORED_REPOSITORY, unknown, project)
    if found.event == "check_run" and not _candidate_of(chain, project, found):
        return _ignored(found, IGNORED_CANDIDATE, "the check run names no candidate of this project", project)
    app_principal = config.github.app_principal
    signed = sha256(body).hexdigest()
    return chain.retrying(lambda: _record(chain, project, app_principal, found, signed))


def _candidate_of(chain: Chain, project: str, delivery: Delivery) -> bool:
    candidate_id = str(delivery.fields["candidate_id"])
    if candidate_id.startswith(DELIVERY_CHAIN_PREFIX):  # a delivery's own chain is no candidate
        return False
    try:
        _stream, state = chain.candidate(project, candidate_id)
    except Refusal as refusal:
        if refusal.code == "NOT_FOUND":
            return False
        raise
    return bool(state.candidate["revision"] == delivery.fields["head"])


def delivery_ref(project: str, body_sha256: str) -> StreamRef:
    """The chain of one delivery, named by the SHA-256 of its signed body (the header's id is not signed)."""
    return StreamRef(project, DELIVERY_CHAIN_PREFIX + body_sha256)


def _record(
    chain: Chain, project: str, app_principal: str, delivery: Delivery, body_sha256: str
) -> WebhookReceived:
    ref = delivery_ref(project, body_sha256)
    answer = {
        "delivery_id": delivery.delivery_id,
        "event": delivery.event,
        "action": delivery.action,
        "project": project,
    }
    existing = chain.load(ref)
    if existing is not None:
        return WebhookReceived(
            status="duplicate", code=None, detail="this delivery was recorded before", **answer
        )
    record = delivery.record()
    fact = {"type": "forge.delivery_received", "delivery": record, "recorded_at": chain.now()}
    outbox = [{"kind": OUTBOX_FORGE_DELIVERY, "project": project, "delivery": record}]
    if delivery.event == "check_run":
        # A re-run asks nothing of GitHub: it goes straight to the check publisher, as a new candidate's
        # check does (the same outbox item, which the publisher's own bus rule takes).
        outbox = [
            {"kind": OUTBOX_FORGE_CHECK, "project": project, "candidate_id": delivery.fields["candidate_id"]}
        ]
    try:
        return chain.commit(
            CommitRequest(Stream(ref, [], {}, None), app_principal, fact, outbox=outbox),
            lambda _seq: WebhookReceived(
                status="accepted", code=None, detail="recorded for the forge worker", **answer
            ),
        )
    except StoreConflict:
        # Another copy of this delivery created the chain between the read and the write.
        return WebhookReceived(
            status="duplicate", code=None, detail="this delivery was recorded before", **answer
        )


# ---- the worker ---------------------------------------------------------------------------------------


def handle_delivery(
    chain: Chain,
    forge: Forge,
    project: str,
    record: dict[str, Any],
    app: Actor,
    sponsor_of: Callable[[str], str | None] = lambda _principal: None,
) -> ForgeHandled:
    """The worker's one entry: a recorded delivery (the `delivery` of a `forge_delivery` outbox item) for
    `project`, acted on as `app` (the app's principal as the directory has it now: kind, roles, sponsor).
    `sponsor_of` names the sponsor of the author's mapped principal (an agent's human), who may not approve
    either (DOMAIN.md rule 12).

    Raises ForgeUnavailable (retry later: nothing was written) and ForgeRefused (no retry helps). A candidate
    that exists already is counted in `existing`, never an error: deliveries come at least once."""
    delivery = Delivery.from_record(record)
    _pstream, pstate = chain.project(project)
    config = pstate.config()
    repo = _repository(config, delivery)
    base = {"project": project, "delivery_id": delivery.delivery_id, "event": delivery.event}
    if config is None or config.github is None or repo is None:
        return ForgeHandled(
            **base, created=[], existing=[], attested=None, complete=None, publish=[],
            skipped=IGNORED_REPOSITORY,
        )  # fmt: skip
    if delivery.event == "check_run":
        candidate = str(delivery.fields["candidate_id"])
        return ForgeHandled(
            **base, created=[], existing=[candidate], attested=None, complete=None, publish=[candidate]
        )
    head, base_sha = str(delivery.fields["head"]), str(delivery.fields["base"])
    change, complete, source = _forge_change(forge, config, repo, base_sha, head)
    author = delivery.fields.get("author")
    if delivery.event == "merge_group":
        author = _queued_author(forge, repo.repository, delivery.fields.get("pull_request"))
    forge_record = {
        "forge": "github",
        "repository": repo.repository,
        "delivery_id": delivery.delivery_id,
        "event": delivery.event,
        "pull_request": delivery.fields.get("pull_request"),
        "complete": complete,
        "files_source": source,
        "requester_of_record": _requester(config.github, author, sponsor_of),
    }
    sender = delivery.fields.get("sender")
    if isinstance(sender, str) and sender.lower() != str(author).lower():
        # Someone else pushed this head to the author's pull request: they may not approve it either.
        forge_record["pushed_by"] = _requester(config.github, sender, sponsor_of)
    created, existing = [], []
    for environment in repo.environments:
        request = CandidateRequest(
            subject=repo.subject,
            base_revision=base_sha,
            revision=head,
            environment=environment,
            change=change,
        )
        try:
            made = create_candidate(chain, project, app, request, None, forge=forge_record)
            created.append(made.candidate_id)
        except Refusal as refusal:
            if refusal.code != "CANDIDATE_EXISTS":
                raise
            found = str(refusal.extra.get("candidate_id", ""))
            existing.append(found)
            _owe_forge_change(chain, project, app, found, change, complete, delivery.delivery_id)
    attested = complete and app.kind == "ci" and app.id in config.change_context_publishers
    return ForgeHandled(
        **base,
        created=created,
        existing=existing,
        attested=attested and "publisher" in app.roles,
        complete=complete,
        publish=[*existing],  # new candidates carry their own forge_check outbox item
    )


def _owe_forge_change(
    chain: Chain,
    project: str,
    app: Actor,
    candidate_id: str,
    change: Change,
    complete: bool,
    delivery_id: str,
) -> None:
    """A candidate someone else claimed first for this commit (an agent knows its commit before it pushes,
    and may name a narrow change from a base of its choosing) still owes what the forge says changed: the
    forge's account joins its change contexts (a union, so it only adds obligations), attested when complete.
    One the worker created itself carries it already. Keyed by the delivery, so a redelivery adds nothing."""
    _stream, state = chain.candidate(project, candidate_id)
    if "forge" in state.candidate:
        return
    request = ChangeContextRequest(change=change)
    add_change_context(chain, project, candidate_id, app, request, f"forge-{delivery_id}", attest=complete)


def _queued_author(forge: Forge, repository: str, number: Any) -> str | None:
    """The author of the pull request a merge queue's commit tests, read from GitHub (never from the
    delivery): they may not approve the queue's commit of their own change either."""
    if type(number) is not int:
        return None
    return forge.pull_request_author(repository, number)


def _requester(github: GitHubForge, login: Any, sponsor_of: Callable[[str], str | None]) -> dict[str, Any]:
    principal = _mapped(github, login)
    found: dict[str, Any] = {"login": login if isinstance(login, str) else None, "principal": principal}
    sponsor = sponsor_of(principal) if principal else None
    if sponsor:
        found["sponsor"] = sponsor
    return found


def _mapped(github: GitHubForge, login: Any) -> str | None:
    """The principal a login maps to (GitHub logins are case-insensitive), or None: recorded as unmapped."""
    if not isinstance(login, str):
        return None
    wanted = login.lower()
    return next((p for name, p in github.logins.items() if name.lower() == wanted), None)


def _forge_change(
    forge: Forge, config: ProjectConfig, repo: GitHubRepository, base: str, head: str
) -> tuple[Change, bool, str]:
    """The change as the forge reports it: its files (renames with both paths), and each OpenAPI document a
    derivation rule names, read at both commits when its path changed (every one when the list is not
    complete). Everything is read before anything is written, so a forge failing halfway writes nothing."""
    changed = forge.changed_files(repo.repository, base, head)
    if (changed.base, changed.head) != (base, head):
        raise ForgeRefused("the forge answered for other commits than those asked")
    files = sorted(set(changed.files))
    complete = changed.complete and len(files) <= MAX_FILES
    files = files[:MAX_FILES]
    named = {r.openapi for r in config.derivation_rules if r.openapi}
    documents = []
    for name, path in sorted(repo.openapi.items()):
        if name not in named or (complete and path not in files):
            continue
        before = _document(forge.read_file(repo.repository, base, path), base, path)
        after = _document(forge.read_file(repo.repository, head, path), head, path)
        if before != after:
            documents.append(OpenApiChange(name=name, before=before, after=after))
    try:
        return Change(files=files, openapi=documents), complete, changed.source
    except ValidationError as error:
        raise ForgeRefused(f"the forge's change cannot be read as a change context: {error.error_count()} "
                           "problems") from None  # fmt: skip


def _document(found: ForgeDocument, revision: str, path: str) -> str | None:
    if (found.path, found.revision) != (path, revision):
        raise ForgeRefused("the forge answered for another file or commit than asked")
    return found.text
