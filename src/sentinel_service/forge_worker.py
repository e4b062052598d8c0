"""The forge worker's entry points: one recorded delivery in, candidates out (sentinel_domain.usecases.forge),
and the call point of the check publisher.

The outbox carries two kinds here: `forge_delivery` (a verified webhook delivery, recorded by the webhook
route) and `forge_check` (a candidate whose check run must be published: a new forge candidate, or a check
run GitHub asked to re-run). Locally the runner's relay hands both to `handle_outbox_item` in-process and
retries with backoff while the forge is unavailable; in AWS the bus rule invokes `worker_handler` with the
DynamoDB stream record (Lambda's async retries, then the dead-letter queue).

Simple to call: `run_forge_delivery(services, project, delivery)` with a `compose(...)` product that holds a
`forge` (the GitHub adapter, or the tests' fake) is the whole worker; `check_publisher(project, candidate_id)`
on the services is where publishing the check starts (built by the check publisher's helper)."""

import json
import logging
from collections.abc import Callable
from typing import Any

from sentinel_domain.errors import Refusal
from sentinel_domain.forge import ForgeRefused
from sentinel_domain.models import Actor
from sentinel_domain.ports import StreamRef
from sentinel_domain.usecases.chain import ANSWER_TAG, SYNTHETIC, side_effect_verifies
from sentinel_domain.usecases.forge import ForgeHandled, handle_delivery
from sentinel_service import names
from sentinel_service.compose import Services

LOG = logging.getLogger("sentinel.forge")


def app_actor(services: Services, project: str, principal_id: str) -> Actor:
    """The app's principal as the directory holds it now. Revoked, unknown, or acting for a revoked sponsor:
    no roles at all, so the use case refuses it (NOT_FOUND) and nothing is created or attested."""
    found = services.admin.get(principal_id)
    if found is None or found.get("revoked"):
        return Actor(id=principal_id, kind="ci")
    sponsor = found.get("sponsor")
    if sponsor:
        held = services.admin.get(str(sponsor))
        if held is None or held.get("revoked"):
            return Actor(id=principal_id, kind="ci")
    roles = tuple((found.get("roles") or {}).get(project, ()))
    return Actor(id=principal_id, kind=found.get("kind", "ci"), sponsor=sponsor, roles=roles)


def run_forge_delivery(services: Services, project: str, delivery: dict[str, Any]) -> ForgeHandled:
    """The worker for one recorded delivery. Raises ForgeUnavailable (retry later; nothing was written),
    ForgeRefused or Refusal (no retry helps). The candidates it names in `publish` go to the check
    publisher."""
    chain = services.gate.chain
    _stream, state = chain.project(project)
    config = state.config()
    principal = config.github.app_principal if config is not None and config.github is not None else ""
    app = app_actor(services, project, principal) if principal else Actor(id="-", kind="ci")
    if config is None or config.github is None:
        # The repository is no longer this project's: the use case says so and writes nothing.
        return handle_delivery(chain, _Unused(), project, delivery, app)
    forge = services.forge(config.github)  # the project's GitHub App (the adapter, or the tests' fake)
    done = handle_delivery(chain, forge, project, delivery, app, lambda p: _sponsor(services, p))
    publish_checks(services, project, done.publish)
    return done


class _Unused:
    """A forge never asked: the delivery names no repository the project still configures."""

    def changed_files(self, repository: str, base: str, head: str) -> Any:
        raise AssertionError("unreachable: no GitHub configuration")

    def read_file(self, repository: str, revision: str, path: str) -> Any:
        raise AssertionError("unreachable: no GitHub configuration")

    def publish_check(self, repository: str, check: Any) -> Any:
        raise AssertionError("unreachable: no GitHub configuration")

    def pull_request_author(self, repository: str, number: int) -> str | None:
        raise AssertionError("unreachable: no GitHub configuration")


def _sponsor(services: Services, principal_id: str) -> str | None:
    found = services.admin.get(principal_id)
    sponsor = found.get("sponsor") if found is not None else None
    return str(sponsor) if sponsor else None


def publish_checks(services: Services, project: str, candidate_ids: list[str]) -> None:
    """The check publisher's call point: each candidate's check run is (re)published by the services'
    `check_publisher` (the forge check publisher unless the caller handed in another)."""
    for candidate_id in candidate_ids:
        services.check_publisher(project, candidate_id)


def handle_outbox_item(services: Services, kind: str, entry: dict[str, Any]) -> Any:
    """One authentic outbox item of a forge kind (its tag already verified by the caller)."""
    project = str(entry.get("project", ""))
    if kind == names.OUTBOX_KIND_FORGE_DELIVERY:
        return run_forge_delivery(services, project, dict(entry["delivery"]))
    if kind == names.OUTBOX_KIND_FORGE_CHECK:
        publish_checks(services, project, [str(entry["candidate_id"])])
        return None
    raise ValueError(f"not a forge outbox kind: {kind}")


FORGE_KINDS = (names.OUTBOX_KIND_FORGE_DELIVERY, names.OUTBOX_KIND_FORGE_CHECK)


def _stream_item(record: dict[str, Any]) -> tuple[str, str, dict[str, Any]] | None:
    """(pk, kind, entry) of an outbox stream record, or None."""
    dynamodb = record.get("dynamodb") if isinstance(record, dict) else None
    if not isinstance(dynamodb, dict):
        return None
    keys, image = dynamodb.get("Keys") or {}, dynamodb.get("NewImage") or {}
    pk = str((keys.get(names.PK) or {}).get("S", ""))
    kind = str((image.get("outbox_kind") or {}).get("S", ""))
    try:
        entry = json.loads(str((image.get("item") or {}).get("S", "")))
    except ValueError:
        return None
    return (pk, kind, entry) if isinstance(entry, dict) else None


def _chain_of(pk: str) -> StreamRef | None:
    if not pk.startswith("P#"):
        return None
    project, _, candidate_id = pk[2:].partition("#C#")
    return StreamRef(project, candidate_id or None) if project else None


def worker_handler(provider: Callable[[], Services]) -> Callable[[Any, Any], dict[str, Any]]:
    """The forge worker Lambda: the bus event's detail is the outbox item's DynamoDB stream record. An item
    whose tag does not verify under the chain key was not written by the gate: refused, never acted on.
    ForgeUnavailable is raised, so Lambda retries the event and, in the end, parks it in the dead-letter
    queue; a refusal is final and logged."""

    def handler(event: Any, _context: Any) -> dict[str, Any]:
        services = provider()
        found = _stream_item((event or {}).get("detail") or {})
        if found is None or found[1] not in FORGE_KINDS:
            return {"status": "ignored"}
        pk, kind, entry = found
        ref = _chain_of(pk)
        if ref is None or not side_effect_verifies(services.chain_seal(), ref, entry):
            LOG.error("forged forge outbox item in %s refused", pk)
            return {"status": "forged"}
        body = {k: v for k, v in entry.items() if k != ANSWER_TAG}
        if body.get("project") != ref.project:
            return {"status": "forged"}
        if body.get(SYNTHETIC) is True:
            # A synthetic project's item (the acceptance suite's), which the bus rule excludes by its
            # attribute: one that arrives anyway (the attribute stripped) is still never acted on.
            LOG.warning("synthetic forge outbox item in %s ignored", pk)
            return {"status": "synthetic"}
        try:
            done = handle_outbox_item(services, kind, body)
        except (ForgeRefused, Refusal) as refused:
            detail = getattr(refused, "code", "") or getattr(refused, "detail", "")
            LOG.error("forge item in %s refused: %s", pk, detail)
            return {"status": "refused", "detail": str(detail)}
        return {"status": "done", "result": done.as_json() if done is not None else None}

    return handler
