"""Who may hold which role, and the shape of ids: plain data, so the authorizer loads no pydantic."""

PROJECT_ID = r"^[a-z0-9][a-z0-9-]{1,62}$"
IDENT = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"

# DOMAIN.md, Principal: the roles each kind may hold.
ROLES_BY_KIND: dict[str, frozenset[str]] = {
    "human": frozenset({"requester", "reviewer", "auditor", "admin"}),
    "agent": frozenset({"requester", "auditor"}),
    "ci": frozenset({"requester", "publisher", "auditor"}),
}
