"""The operator's acts: provision a project, add, rotate and revoke principals, and record each act on the
chains it concerns. The CLI, the demo seed, the acceptance gate's minting and the benchmarks all act through
this one service; none of them reaches the principals table or the project chain by another path.

Projects and principals are never managed through the API: the operator (with its own AWS credentials, or
the embedded store's files) is the root of trust."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from sentinel_domain.errors import Refusal
from sentinel_domain.models import Actor, Policy, ProjectConfig
from sentinel_domain.ports import Clock, StreamRef
from sentinel_domain.records import exposures
from sentinel_domain.state import parse_facts
from sentinel_domain.usecases import Gate
from sentinel_service.adapters.principal_changes import PrincipalChanges, sequential
from sentinel_service.adapters.principal_rules import PrincipalRefused, PrincipalWriter, not_found

T = TypeVar("T")

# The operator as the project chain records it when it writes policies and configuration out of band.
OPERATOR = Actor(id="operator", kind="human", roles=("admin",))


@dataclass(frozen=True)
class Issued:
    principal_id: str
    token: str
    created: bool  # False: the principal existed and was issued a fresh token (the old one stops working)


class ProjectHeads(Protocol):
    """What lists the projects: every project chain's head, [{project, seq, hash}] (both state stores)."""

    def project_heads(self) -> list[dict[str, Any]]: ...


# A principal change whose chain moved between its read and its transaction (DynamoDB) is tried again.
CHANGE_ATTEMPTS = 3


class Operator:
    def __init__(
        self,
        gate: Gate,
        admin: PrincipalWriter,
        token_key: Callable[[], bytes],
        clock: Clock,
        changes: PrincipalChanges = sequential,
        projects: ProjectHeads | None = None,
    ) -> None:
        self.gate = gate
        self.admin = admin
        self._token_key = token_key
        self._clock = clock
        # How a principal change and its chain events commit together (principal_changes).
        self._changes = changes
        self._projects = projects

    # ---- projects ----------------------------------------------------------------------------------------

    def project_exists(self, project: str) -> bool:
        stream = self.gate.store.load(StreamRef(project))
        return bool(stream and stream.facts)

    def create_project(self, project: str, *, synthetic: bool = False) -> int:
        """A new project and its chain; the seq of its first event. An existing id is refused. `synthetic`
        (the acceptance suite's project): every side effect it writes is marked synthetic and reaches the
        event log or archive only. It is fixed when the project is created: nothing, no API, changes it."""
        return self.gate.create_project(project, synthetic=synthetic).seq

    def project_synthetic(self, project: str) -> bool:
        """Whether an existing project was created synthetic, from its verified chain (Refusal NOT_FOUND when
        there is no such project)."""
        return self.gate.chain.project(project)[1].synthetic

    def provision_project(
        self,
        project: str,
        policies: Mapping[str, Mapping[str, Any]],
        config: Mapping[str, Any],
        *,
        synthetic: bool = False,
    ) -> bool:
        """Idempotent: a missing project is created with these policies and this configuration (True); an
        existing one keeps its chain untouched (False)."""
        if self.project_exists(project):
            return False
        self.create_project(project, synthetic=synthetic)
        for policy_id, policy in policies.items():
            self.gate.put_policy(project, policy_id, OPERATOR, Policy.model_validate(policy))
        self.gate.put_config(project, OPERATOR, ProjectConfig.model_validate(config), None)
        return True

    def list_projects(self) -> list[dict[str, Any]]:
        """Every project: its chain's length, head and verification, how many candidates it holds and how many
        principals hold a role in it (revoked ones apart)."""
        if self._projects is None:
            raise Refusal("STATE_UNAVAILABLE", "this store cannot list projects")
        principals = self.admin.principals()
        listed = []
        for head in self._projects.project_heads():
            project = head["project"]
            stream = self.gate.store.load(StreamRef(project))
            verification = self.gate.verify(stream) if stream is not None else None
            members = [p for p in principals if project in (p.get("roles") or {})]
            listed.append(
                {
                    "project": project,
                    "chain_length": head["seq"],
                    "head_hash": head["hash"],
                    "chain_valid": bool(verification and verification.valid),
                    "first_bad_seq": verification.first_bad_seq if verification else None,
                    "candidates": self._count_candidates(project),
                    "principals": sum(1 for p in members if not p.get("revoked")),
                    "revoked_principals": sum(1 for p in members if p.get("revoked")),
                }
            )
        return listed

    def _count_candidates(self, project: str) -> int:
        count, cursor = 0, None
        while True:
            claims, cursor = self.gate.store.list_claims(project, 500, cursor)
            count += len(claims)
            if cursor is None:
                return count

    # ---- principals --------------------------------------------------------------------------------------

    def add_principal(
        self,
        principal_id: str,
        kind: str,
        sponsor: str | None,
        roles: Mapping[str, Sequence[str]],
        ttl_seconds: int | None = None,
    ) -> str:
        """A new principal and its token; the act is recorded on the chain of every project it holds a role
        in."""
        missing = [p for p in roles if not self.project_exists(p)]
        if missing:
            raise PrincipalRefused("NOT_FOUND", f"no project {', '.join(missing)}: create it first")
        clean = {p: list(r) for p, r in roles.items()}

        def change(extra: Sequence[dict[str, Any]]) -> str:
            return self.admin.add(
                principal_id,
                kind,
                sponsor,
                clean,
                ttl_seconds,
                self._token_key(),
                self._clock.now(),
                extra_items=extra,
            )

        def record() -> None:
            for project, project_roles in roles.items():
                self.gate.record_project_event(
                    project,
                    "principal.added",
                    {
                        "principal_id": principal_id,
                        "kind": kind,
                        "sponsor": sponsor,
                        "roles": list(project_roles),
                    },
                )

        return self._atomically(change, record)

    def rotate(self, principal_id: str, ttl_seconds: int | None = None) -> str:
        def change(extra: Sequence[dict[str, Any]]) -> str:
            return self.admin.rotate(
                principal_id, ttl_seconds, self._token_key(), self._clock.now(), extra_items=extra
            )

        return self._atomically(change, self._recorder(principal_id, "principal.rotated", {}))

    def revoke(self, principal_id: str, compromised: bool) -> dict[str, Any]:
        """Revoke for good. `compromised`: everything the principal approved, attested, published or requested
        stops counting on every candidate of its projects, from the revocation on (DOMAIN.md rule 26); a
        plain revocation only refuses it (and the principals it sponsors) from now on."""

        def change(extra: Sequence[dict[str, Any]]) -> dict[str, Any]:
            return self.admin.revoke(principal_id, compromised, self._clock.now(), extra_items=extra)

        view = self._atomically(
            change,
            self._recorder(principal_id, "principal.revoked", {"compromised": bool(compromised)}),
        )
        return {"principal_id": principal_id, "revoked": True, "compromised": bool(view["compromised"])}

    def issue(
        self,
        principal_id: str,
        kind: str,
        sponsor: str | None,
        roles: Mapping[str, Sequence[str]],
        ttl_seconds: int | None = None,
    ) -> Issued:
        """A token for this principal: added when missing, else rotated (its earlier token stops working)."""
        try:
            return Issued(
                principal_id, self.add_principal(principal_id, kind, sponsor, roles, ttl_seconds), True
            )
        except PrincipalRefused as refused:
            if refused.code != "PRINCIPAL_EXISTS":
                raise
        existing = self.admin.get(principal_id) or {}
        asked = {"kind": kind, "sponsor": sponsor or None, "roles": {p: sorted(r) for p, r in roles.items()}}
        held = {
            "kind": existing.get("kind"),
            "sponsor": existing.get("sponsor") or None,
            "roles": {p: sorted(existing.get("roles", {}).get(p, [])) for p in roles},
        }
        if held != asked:
            # Re-issuing never changes who a principal is: a token for another kind, sponsor or roles is
            # refused.
            raise PrincipalRefused(
                "PRINCIPAL_EXISTS",
                f"principal {principal_id} exists as {held['kind']} with "
                f"sponsor {held['sponsor']} and roles {held['roles']}, not as asked; not re-issued",
            )
        return Issued(principal_id, self.rotate(principal_id, ttl_seconds), False)

    def list_principals(self, project: str | None = None, kind: str | None = None) -> list[dict[str, Any]]:
        """Every principal (never a token or its hash); with `project`, those holding a role in it; with
        `kind`, those of that kind."""
        return [
            p
            for p in self.admin.principals()
            if (project is None or project in (p.get("roles") or {}))
            and (kind is None or p.get("kind") == kind)
        ]

    def principal(self, principal_id: str) -> dict[str, Any] | None:
        return self.admin.get(principal_id)

    # ---- audit ---------------------------------------------------------------------------------------------

    def exposure(self, principal_id: str) -> list[dict[str, Any]]:
        """Every recorded `ready` decision, on every candidate of the projects the principal holds a role in,
        that relied on it (DOMAIN.md rule 26): what it released is exposed, so its forge checks and receipts
        are to be treated as exposed. A candidate chain that cannot be read whole or fails verification is
        listed too (`relied_on_as: ["unverifiable"]`): what it hides cannot be ruled out."""
        view = self.admin.get(principal_id)
        if view is None:
            raise not_found(principal_id)
        found: list[dict[str, Any]] = []
        for project in sorted(view["roles"]):
            cursor: str | None = None
            while True:
                claims, cursor = self.gate.store.list_claims(project, 500, cursor)
                for claim in claims:
                    found.extend(self._candidate_exposure(project, claim, principal_id))
                if cursor is None:
                    break
        return found

    def _candidate_exposure(
        self, project: str, claim: dict[str, Any], principal_id: str
    ) -> list[dict[str, Any]]:
        stream = self.gate.store.load(StreamRef(project, claim["candidate_id"]))
        if stream is None:
            return []
        verification = self.gate.verify(stream)
        try:
            facts = parse_facts(stream.facts)
            found = exposures(facts, principal_id) if stream.complete and verification.valid else None
        except (ValueError, KeyError, TypeError):
            found = None
        if found is None:
            reason = (
                "the chain is larger than one read may page through"
                if not stream.complete
                else f"the chain fails verification at seq {verification.first_bad_seq} "
                f"({verification.reason})"
                if not verification.valid
                else "a stored fact cannot be read"
            )
            return [
                {
                    "project": project,
                    "candidate_id": claim["candidate_id"],
                    "subject": claim.get("subject"),
                    "revision": claim.get("revision"),
                    "environment": claim.get("environment"),
                    "relied_on_as": ["unverifiable"],
                    "reason": reason,
                    "exposed": True,
                }
            ]
        return [{"project": project, **entry, "exposed": True} for entry in found]

    def _recorder(self, principal_id: str, type_: str, payload: dict[str, Any]) -> Callable[[], None]:
        """The chain events of a change to an existing principal: one on each project it holds a role in."""

        def record() -> None:
            view = self.admin.get(principal_id) or {}
            for project in sorted(view.get("roles", {})):
                self.gate.record_project_event(project, type_, {"principal_id": principal_id, **payload})

        return record

    def _atomically(self, change: Callable[[Sequence[dict[str, Any]]], T], record: Callable[[], None]) -> T:
        for attempt in range(CHANGE_ATTEMPTS):
            try:
                result = self._changes(change, record)
            except PrincipalRefused as refused:
                self.gate.chain.deferred_checkpoints(deliver=False)  # never committed: never witnessed
                if refused.code != "CONFLICT" or attempt == CHANGE_ATTEMPTS - 1:
                    raise
                continue
            except BaseException:
                self.gate.chain.deferred_checkpoints(deliver=False)
                raise
            # Committed: its checkpoints reach the witness now, as every other write's do before answering.
            self.gate.chain.deferred_checkpoints(deliver=True)
            return result
        raise AssertionError("unreachable")  # the loop returns or raises


__all__ = ["OPERATOR", "Issued", "Operator", "PrincipalRefused", "ProjectHeads", "Refusal"]
