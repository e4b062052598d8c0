"""Security requirements and the schemes they name: what credentials an operation demands, compared as
alternatives, and whether a scheme a client is configured for changed under it."""

from __future__ import annotations

from typing import Any

from .changes import BOTH, LOOSENED
from .document import ANNOTATIONS, Document
from .errors import quote
from .schemas import _SchemaDiffer


class _SecurityDiffer(_SchemaDiffer):
    """The security of one operation pair."""

    # -- security

    def _requirements(
        self, doc: Document, operation: dict[str, Any], inherit: bool
    ) -> list[dict[str, frozenset[str]]] | None:
        raw = (
            operation["security"]
            if "security" in operation
            else doc.root.get("security")
            if inherit
            else None
        )
        if raw is None:
            return None
        out = []
        for alternative in doc.sequence(raw, "security"):
            alt = doc.mapping(alternative, "a security requirement", deref=False)
            out.append(
                {
                    name: frozenset(str(s) for s in doc.sequence(scopes, "security scopes"))
                    for name, scopes in alt.items()
                }
            )
        return out

    def _scheme(self, doc: Document, name: str) -> Any:
        schemes = doc.mapping(
            doc.mapping(doc.root.get("components"), "components", deref=False).get("securitySchemes"),
            "securitySchemes",
            deref=False,
        )
        return doc.deref(schemes.get(name))

    def _security(self, o: dict[str, Any], n: dict[str, Any], add: Any, where: str, inherit: bool) -> None:
        old, new = self._requirements(self.old, o, inherit), self._requirements(self.new, n, inherit)
        old_open = not old or any(not alt for alt in old)
        new_open = not new or any(not alt for alt in new)
        if old_open and not new_open:
            add("security-added", True, where, "credentials are now required")
        elif new_open and not old_open:
            add(
                "security-removed",
                False,
                where,
                "the operation can now be called without credentials",
                weakens=True,
            )
        elif not old_open and not new_open:
            assert old is not None and new is not None

            def satisfies(demanded: dict[str, frozenset[str]], offered: dict[str, frozenset[str]]) -> bool:
                # Credentials meeting `offered` also meet `demanded` when it asks no more schemes or scopes.
                return all(s in offered and scopes <= offered[s] for s, scopes in demanded.items())

            for alt in old:
                if not any(satisfies(new_alt, alt) for new_alt in new):
                    same_schemes = [a for a in new if set(a) == set(alt)]
                    kind = "security-scopes-added" if same_schemes else "security-requirement-removed"
                    add(kind, True, where, _requirement_text(alt))
            for alt in new:
                if not any(satisfies(old_alt, alt) for old_alt in old):
                    same_schemes = [a for a in old if set(a) == set(alt)]
                    kind = "security-scopes-removed" if same_schemes else "security-requirement-added"
                    add(kind, False, where, _requirement_text(alt), weakens=True)
        used = {s for alt in (old or []) for s in alt} & {s for alt in (new or []) for s in alt}
        for scheme in sorted(used):
            effect = _scheme_effect(self._scheme(self.old, scheme), self._scheme(self.new, scheme))
            if effect:
                add("security-scheme-changed", effect == BOTH, where, f"{quote(scheme)}: {effect}")


def _requirement_text(requirement: dict[str, frozenset[str]]) -> str:
    parts = [
        quote(name) + (f" [{', '.join(quote(s) for s in sorted(scopes))}]" if scopes else "")
        for name, scopes in sorted(requirement.items())
    ]
    return " and ".join(parts) or "anonymous"


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _scheme_effect(old: Any, new: Any) -> str | None:
    """How a security scheme the operation relies on changed: None, LOOSENED (only flows or scopes added) or
    BOTH (anything a configured client depends on: its type, where the credential goes, a token URL...)."""
    if old == new:
        return None
    if not isinstance(old, dict) or not isinstance(new, dict):
        return BOTH

    def plain(value: dict[str, Any]) -> dict[str, Any]:
        return {
            k: v for k, v in value.items() if k not in ANNOTATIONS and not k.startswith("x-") and k != "flows"
        }

    if plain(old) != plain(new):
        return BOTH
    old_flows = _mapping(old.get("flows"))
    new_flows = _mapping(new.get("flows"))
    effect = None
    for flow, o_flow in old_flows.items():
        n_flow = new_flows.get(flow)
        if not isinstance(o_flow, dict) or not isinstance(n_flow, dict):
            return BOTH
        o_scopes = _mapping(o_flow.get("scopes"))
        n_scopes = _mapping(n_flow.get("scopes"))
        if plain({k: v for k, v in o_flow.items() if k != "scopes"}) != plain(
            {k: v for k, v in n_flow.items() if k != "scopes"}
        ):
            return BOTH
        if set(o_scopes) - set(n_scopes):
            return BOTH
        if set(n_scopes) - set(o_scopes):
            effect = LOOSENED
    if set(new_flows) - set(old_flows):
        effect = LOOSENED
    return effect
