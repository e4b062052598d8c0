"""The project chain: the operator's acts (a project created, principals added, rotated, revoked; never over
the API), the project's configuration and its policies."""

import re
from collections.abc import Iterable
from typing import Any

from ..errors import IF_MATCH_MISSING, IF_MATCH_STALE, Refusal
from ..forge_checks import recheck_outbox
from ..identity import IDENT
from ..models import Actor, Policy, ProjectBundle, ProjectConfig
from ..outcomes import (
    BundleApplied,
    BundleChanges,
    ConfigVersion,
    ConfigVersionStored,
    PolicyList,
    PolicyVersion,
    PolicyVersionStored,
    ProjectEventRecorded,
)
from ..ports import Stream, StreamRef
from ..state import BUNDLE_FACT, ProjectState
from .chain import OPERATOR, Chain, CommitRequest, if_match_value, need


def create_project(chain: Chain, project: str, *, synthetic: bool = False) -> ProjectEventRecorded:
    """A new project chain. `synthetic` (the operator's choice, never a request's): every side effect of the
    project is marked synthetic (Chain.commit). The fact carries the key only when it is true, so chains
    written before it existed replay to the same digests."""

    def attempt() -> ProjectEventRecorded:
        stream = chain.load(StreamRef(project), release=True) or Stream(StreamRef(project), [], {}, None)
        if stream.facts:
            raise Refusal("VALIDATION_FAILED", f"project {project} exists already")
        # A new chain is checked too: one the witness knows (its partition lost) is never created again, and
        # without a witness or a key nothing is.
        chain.require_intact(stream)
        fact: dict[str, Any] = {"type": "project.created", "project": project, "recorded_at": chain.now()}
        if synthetic:
            fact["synthetic"] = True
        return chain.commit(
            CommitRequest(stream, OPERATOR, fact), lambda seq: ProjectEventRecorded(project=project, seq=seq)
        )

    return chain.retrying(attempt)


def record_project_event(
    chain: Chain, project: str, type_: str, payload: dict[str, Any]
) -> ProjectEventRecorded:
    def attempt() -> ProjectEventRecorded:
        stream, state = chain.project(project)
        fact = {"type": type_, **payload, "recorded_at": chain.now()}
        outbox = recheck_outbox(state.config(), project, type_)
        return chain.commit(
            CommitRequest(stream, OPERATOR, fact, outbox=outbox),
            lambda seq: ProjectEventRecorded(project=project, seq=seq),
        )

    return chain.retrying(attempt)


def _require_if_match(version: int, if_match: str | None) -> None:
    """The configuration's optimistic version: once one exists, every write names it (missing or stale)."""
    wanted = if_match_value(if_match)
    if version and wanted is None:
        raise Refusal(
            "VERSION_CONFLICT",
            "replacing the configuration needs If-Match with its ETag",
            reason=IF_MATCH_MISSING,
        )
    if wanted is not None and wanted != str(version):
        raise Refusal(
            "VERSION_CONFLICT",
            f"If-Match names version {wanted}; the current one is {version}",
            reason=IF_MATCH_STALE,
        )


def _judge_config(config: ProjectConfig, policy_ids: Iterable[str]) -> None:
    """What a configuration must satisfy against the policies there will be when it is in force."""
    named = {config.unclassified_policy, *(r.policy_id for r in config.derivation_rules)}
    missing = sorted(named - set(policy_ids))
    if missing:
        raise Refusal("VALIDATION_FAILED", f"unknown policies {', '.join(missing)}: create them first")
    for rule in config.derivation_rules:
        if bool(rule.files) == bool(rule.openapi):
            raise Refusal("VALIDATION_FAILED", "each derivation rule names either files or openapi")


def _next_policy_version(state: ProjectState, policy_id: str) -> int:
    return len(state.policy_versions(policy_id)) + 1


def _claim_forge(chain: Chain, project: str, config: ProjectConfig) -> None:
    if config.github is not None:
        from .forge import claim_repositories  # only a configuration that names a forge needs the index

        claim_repositories(chain, project, config.github)


def _config_outbox(
    config: ProjectConfig, state: ProjectState, project: str, fact_type: str
) -> list[dict[str, Any]]:
    # The configuration in force before and after: either may map repositories whose checks change.
    return recheck_outbox(config if config.github else state.config(), project, fact_type)


def put_config(
    chain: Chain, project: str, actor: Actor, config: ProjectConfig, if_match: str | None
) -> ConfigVersionStored:
    need(actor, "admin")

    def attempt() -> ConfigVersionStored:
        stream, state = chain.project(project)
        version = state.config_version()
        _require_if_match(version, if_match)
        _judge_config(config, state.policies())
        _claim_forge(chain, project, config)
        fact = {
            "type": "config.set",
            "version": version + 1,
            "config": config.stored(),
            "actor": actor.fact(),
            "recorded_at": chain.now(),
        }
        outbox = _config_outbox(config, state, project, "config.set")
        return chain.commit(
            CommitRequest(stream, actor.id, fact, outbox=outbox),
            lambda seq: ConfigVersionStored(version=version + 1, config=config, seq=seq),
        )

    return chain.retrying(attempt)


def put_bundle(
    chain: Chain, project: str, actor: Actor, bundle: ProjectBundle, if_match: str | None
) -> BundleApplied:
    """The configuration and any number of policies as one fact (`bundle.set`), judged as their separate
    writes would be (the configuration against the policies there will be once the bundle is in force), so
    either all of it is recorded or nothing is. Only what differs from the current versions gets a new
    version; a bundle that differs in nothing writes nothing."""
    need(actor, "admin")

    def attempt() -> BundleApplied:
        stream, state = chain.project(project)
        version = state.config_version()
        _require_if_match(version, if_match)
        current = state.policies()
        _require_policy_versions(current, bundle.expected_policy_versions)
        changed = sorted(
            pid
            for pid, policy in bundle.policies.items()
            if pid not in current or current[pid][1].model_dump(mode="json") != policy.model_dump(mode="json")
        )
        _judge_config(bundle.config, {*current, *bundle.policies})
        in_force = state.config()
        config_changed = in_force is None or in_force.stored() != bundle.config.stored()
        versions = {pid: current[pid][0] for pid in bundle.policies if pid not in changed}
        new_versions = {pid: _next_policy_version(state, pid) for pid in changed}
        config_version = version + 1 if config_changed else version

        def outcome(seq: int) -> BundleApplied:
            return BundleApplied(
                config_version=config_version,
                policies=dict(sorted({**versions, **new_versions}.items())),
                changed=BundleChanges(config=config_changed, policies=changed),
                seq=seq,
            )

        if not config_changed and not changed:
            return outcome(stream.seq)
        if config_changed:
            _claim_forge(chain, project, bundle.config)
        fact = {
            "type": BUNDLE_FACT,
            "config": (
                {"version": config_version, "config": bundle.config.stored()} if config_changed else None
            ),
            "policies": [
                {
                    "policy_id": pid,
                    "version": new_versions[pid],
                    "policy": bundle.policies[pid].model_dump(mode="json"),
                }
                for pid in changed
            ],
            "actor": actor.fact(),
            "recorded_at": chain.now(),
        }
        outbox = _config_outbox(bundle.config, state, project, BUNDLE_FACT)
        return chain.commit(CommitRequest(stream, actor.id, fact, outbox=outbox), outcome)

    return chain.retrying(attempt)


def _require_policy_versions(current: dict[str, Any], expected: dict[str, int]) -> None:
    """Each policy the sender says it read must still be at that version (0: still absent)."""
    for pid, wanted in sorted(expected.items()):
        have = current[pid][0] if pid in current else 0
        if have != wanted:
            raise Refusal(
                "VERSION_CONFLICT",
                f"policy {pid} is at version {have}, not the {wanted} the bundle was made from",
                reason=IF_MATCH_STALE,
            )


def get_config(chain: Chain, project: str, actor: Actor) -> ConfigVersion:
    need(actor)
    _stream, state = chain.project(project)
    entry = state.config_entry()
    if entry is None:
        raise Refusal("NOT_FOUND", "the project has no configuration yet")
    return ConfigVersion(version=entry["version"], config=entry["config"])


def _valid_policy_id(policy_id: str) -> None:
    """A policy id is an id like every other (the configuration and plans name policies by it)."""
    if not re.fullmatch(IDENT, policy_id):
        raise Refusal("VALIDATION_FAILED", f"policy_id: must match {IDENT}")


def put_policy(
    chain: Chain, project: str, policy_id: str, actor: Actor, policy: Policy
) -> PolicyVersionStored:
    need(actor, "admin")
    _valid_policy_id(policy_id)

    def attempt() -> PolicyVersionStored:
        stream, state = chain.project(project)
        version = _next_policy_version(state, policy_id)
        fact = {
            "type": "policy.set",
            "policy_id": policy_id,
            "version": version,
            "policy": policy.model_dump(mode="json"),
            "actor": actor.fact(),
            "recorded_at": chain.now(),
        }
        return chain.commit(
            CommitRequest(
                stream, actor.id, fact, outbox=recheck_outbox(state.config(), project, "policy.set")
            ),
            lambda seq: PolicyVersionStored(policy_id=policy_id, version=version, policy=policy, seq=seq),
        )

    return chain.retrying(attempt)


def list_policies(chain: Chain, project: str, actor: Actor) -> PolicyList:
    need(actor)
    _stream, state = chain.project(project)
    return PolicyList(
        policies=[
            PolicyVersion(policy_id=pid, version=v, policy=p)
            for pid, (v, p) in sorted(state.policies().items())
        ]
    )


def get_policy(
    chain: Chain, project: str, policy_id: str, actor: Actor, version: int | None
) -> PolicyVersion:
    need(actor)
    _valid_policy_id(policy_id)
    _stream, state = chain.project(project)
    found = state.policy(policy_id, version=version)
    if found is None:
        raise Refusal("NOT_FOUND", f"no policy {policy_id}" + (f" version {version}" if version else ""))
    return PolicyVersion(policy_id=policy_id, version=found[0], policy=found[1])
