"""Project and candidate state, folded from their facts (the stored payloads of audit events).

Facts are append-only; the state at an instant is the fold of the facts recorded at or before it."""

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .audit import fact_digest
from .models import Policy, ProjectConfig


def parse_facts(facts: dict[int, str]) -> list[dict[str, Any]]:
    """Facts in chain order, each with its chain position and the digest of its stored text."""
    out = []
    for seq in sorted(facts):
        fact = json.loads(facts[seq])
        fact["_seq"] = seq
        fact["_digest"] = fact_digest(facts[seq])
        out.append(fact)
    return out


def public(fact: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fact.items() if not k.startswith("_")}


def _visible(fact: dict[str, Any], as_of: str | None) -> bool:
    return as_of is None or fact["recorded_at"] <= as_of


SETTING_FACTS = frozenset({"config.set", "policy.set"})
BUNDLE_FACT = "bundle.set"


def setting_entries(fact: dict[str, Any]) -> list[dict[str, Any]]:
    """A fact as the configuration and policy versions it sets, each shaped as the `config.set` or
    `policy.set` fact a separate write records: a bundle (`bundle.set`, one fact for a configuration and the
    policies written with it) sets the same versions its separate writes would, at its own seq and instant."""
    if fact["type"] in SETTING_FACTS:
        return [fact]
    if fact["type"] != BUNDLE_FACT:
        return []
    shared = {k: v for k, v in fact.items() if k in ("actor", "recorded_at") or k.startswith("_")}
    entries = [
        {
            **shared,
            "type": "policy.set",
            "policy_id": p["policy_id"],
            "version": p["version"],
            "policy": p["policy"],
        }
        for p in fact["policies"]
    ]
    if fact.get("config") is not None:
        entries.append({**shared, "type": "config.set", **fact["config"]})
    return entries


@dataclass
class ProjectState:
    project: str
    facts: list[dict[str, Any]]
    # Memos for one request's reads: a decision asks the same questions once per (check, obligation).
    _policy_memo: dict[tuple[str, str | None, int | None], tuple[int, Policy] | None] = field(
        default_factory=dict, repr=False, compare=False
    )
    _revoked_memo: dict[str | None, dict[str, str]] = field(default_factory=dict, repr=False, compare=False)
    _settings_memo: list[dict[str, Any]] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_facts(cls, project: str, facts: dict[int, str]) -> "ProjectState":
        return cls(project, parse_facts(facts))

    def visible(self, as_of: str | None) -> list[dict[str, Any]]:
        return [f for f in self.facts if _visible(f, as_of)]

    def settings(self, as_of: str | None = None) -> list[dict[str, Any]]:
        """The configuration and policy versions set at or before `as_of`, in chain order, one entry each
        (`setting_entries`): whether written alone or in a bundle, they read the same."""
        if self._settings_memo is None:
            self._settings_memo = [entry for f in self.facts for entry in setting_entries(f)]
        return [f for f in self._settings_memo if _visible(f, as_of)]

    @property
    def synthetic(self) -> bool:
        """A project the operator created synthetic (the acceptance suite's): its side effects are marked so
        and delivered nowhere but the event log or archive. Only the chain's first fact, `project.created`,
        can say so: nothing appended later turns a project synthetic or back."""
        first = self.facts[0] if self.facts else None
        return bool(first and first["type"] == "project.created" and first.get("synthetic") is True)

    def config_entry(self, as_of: str | None = None) -> dict[str, Any] | None:
        entries = [f for f in self.settings(as_of) if f["type"] == "config.set"]
        return entries[-1] if entries else None

    def config(self, as_of: str | None = None) -> ProjectConfig | None:
        entry = self.config_entry(as_of)
        return ProjectConfig.model_validate(entry["config"]) if entry else None

    def config_version(self, as_of: str | None = None) -> int:
        entry = self.config_entry(as_of)
        return int(entry["version"]) if entry else 0

    def policy_versions(self, policy_id: str, as_of: str | None = None) -> list[dict[str, Any]]:
        return [f for f in self.settings(as_of) if f["type"] == "policy.set" and f["policy_id"] == policy_id]

    def policy(
        self, policy_id: str, as_of: str | None = None, version: int | None = None
    ) -> tuple[int, Policy] | None:
        key = (policy_id, as_of, version)
        if key not in self._policy_memo:
            self._policy_memo[key] = self._policy(policy_id, as_of, version)
        return self._policy_memo[key]

    def _policy(self, policy_id: str, as_of: str | None, version: int | None) -> tuple[int, Policy] | None:
        versions = self.policy_versions(policy_id, as_of)
        if version is not None:
            versions = [v for v in versions if v["version"] == version]
        if not versions:
            return None
        entry = versions[-1]
        return int(entry["version"]), Policy.stored(entry["policy"])

    def policies(self, as_of: str | None = None) -> dict[str, tuple[int, Policy]]:
        out: dict[str, tuple[int, Policy]] = {}
        for f in self.settings(as_of):
            if f["type"] == "policy.set":
                out[f["policy_id"]] = (int(f["version"]), Policy.stored(f["policy"]))
        return out

    def compromised(self, as_of: str | None = None) -> dict[str, str]:
        """Principal id -> when it was first revoked as compromised, for the revocations visible at as_of."""
        if as_of not in self._revoked_memo:
            revoked: dict[str, str] = {}
            for f in self.visible(as_of):
                if f["type"] == "principal.revoked" and f.get("compromised"):
                    revoked.setdefault(f["principal_id"], str(f["recorded_at"]))
            self._revoked_memo[as_of] = revoked
        return self._revoked_memo[as_of]

    def compromised_since(self, principal_id: str, as_of: str | None = None) -> str | None:
        return self.compromised(as_of).get(principal_id)


@dataclass
class CandidateState:
    candidate: dict[str, Any]
    obligations: dict[str, dict[str, Any]] = field(default_factory=dict)
    attested: bool = False
    contexts: list[dict[str, Any]] = field(default_factory=list)
    plans: list[dict[str, Any]] = field(default_factory=list)
    reviews: list[dict[str, Any]] = field(default_factory=list)
    evidence: list[dict[str, Any]] = field(default_factory=list)
    reports: list[dict[str, Any]] = field(default_factory=list)
    settlements: list[dict[str, Any]] = field(default_factory=list)
    executions: list[dict[str, Any]] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    considered: list[str] = field(default_factory=list)  # digests of the facts a decision considers
    _index: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_facts(cls, facts: list[dict[str, Any]], as_of: str | None = None) -> "CandidateState":
        if not facts or facts[0]["type"] != "candidate.created":
            raise LookupError("no candidate.created fact")
        # Before the candidate existed nothing about it is proved: its identity, and no other fact.
        state = cls(candidate=facts[0])
        visible = [f for f in facts if _visible(f, as_of)]
        for fact in visible:
            kind = fact["type"]
            if kind in ("candidate.created", "change_context.added"):
                state.contexts.append(fact)
                state.attested = state.attested or bool(fact["attested"])
                for obligation in fact["obligations_added"]:
                    state.obligations.setdefault(obligation["obligation_id"], obligation)
            elif kind == "plan.stored":
                state.plans.append(fact)
            elif kind == "review.recorded":
                state.reviews.append(fact)
            elif kind == "evidence.recorded":
                state.evidence.append(fact)
            elif kind == "task.reported":
                state.reports.append(fact)
            elif kind == "task.settled":
                state.settlements.append(fact)
            elif kind == "action.executed":
                state.executions.append(fact)
            elif kind == "decision.recorded":
                state.decisions.append(fact)
                continue
            state.considered.append(fact["_digest"])
        return state

    @property
    def candidate_id(self) -> str:
        return str(self.candidate["candidate_id"])

    @property
    def plan(self) -> dict[str, Any] | None:
        return self.plans[-1] if self.plans else None

    @property
    def plan_digest(self) -> str | None:
        return self.plans[-1]["plan_digest"] if self.plans else None

    def scope(self) -> list[str]:
        return sorted({o["scope"] for o in self.obligations.values()})

    def reports_index(self) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """(plan digest, task) -> its reports in chain order; built once per state (read, never change)."""
        if "reports" not in self._index:
            grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
            for r in self.reports:
                grouped.setdefault((r["plan_digest"], r["task_id"]), []).append(r)
            self._index["reports"] = grouped
        index: dict[tuple[str, str], list[dict[str, Any]]] = self._index["reports"]
        return index

    def reports_for(self, digest: str, task_id: str) -> list[dict[str, Any]]:
        return list(self.reports_index().get((digest, task_id), []))

    def evidence_index(self) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """(check, obligation) -> the evidence written for the check and bound to the obligation, in arrival
        order; built once per state (read it, never change it)."""
        if "evidence" not in self._index:
            grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
            for e in self.evidence:
                for o in e["binding"]["obligation_ids"]:
                    grouped.setdefault((e["check_id"], o), []).append(e)
            self._index["evidence"] = grouped
        index: dict[tuple[str, str], list[dict[str, Any]]] = self._index["evidence"]
        return index

    def memo(self, name: str, build: Callable[[], Any]) -> Any:
        """What `build` returns, built once per state: indexes the decision derives from these facts (they
        never change once folded)."""
        if name not in self._index:
            self._index[name] = build()
        return self._index[name]

    def evidence_for(self, check_id: str, obligation_id: str) -> list[dict[str, Any]]:
        """Evidence written for a check and bound to an obligation, in arrival order."""
        return list(self.evidence_index().get((check_id, obligation_id), []))

    def task_passes(self, digest: str, task_id: str) -> bool:
        reports = self.reports_for(digest, task_id)
        return bool(reports) and bool(reports[-1]["passes"])

    def task_settled(self, digest: str, task_id: str) -> bool:
        return any(s["plan_digest"] == digest and s["task_id"] == task_id for s in self.settlements)

    def plan_authors(self, up_to_digest: str | None) -> list[dict[str, Any]]:
        """Authors of every version up to the last one with that digest (a resubmitted digest counts its
        resubmitter too); every author when the digest is unknown."""
        last = max(
            (i for i, p in enumerate(self.plans) if p["plan_digest"] == up_to_digest),
            default=len(self.plans) - 1,
        )
        return [p["author"] for p in self.plans[: last + 1]]
