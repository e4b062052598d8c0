"""Who may call a route, judged before its body is read: a caller with no role in the project learns that the
project does not exist for it (404), a caller with the wrong role that it may not (403), before any 422 about
the body could tell either of them something about the route. The use cases judge the same again (with the
rules that need the stored state: self-approval, sponsors); this only moves the first answer earlier."""

from typing import Any

from sentinel_domain.errors import Refusal
from sentinel_domain.reviews import reviewer_refusal
from sentinel_domain.usecases.chain import need
from sentinel_domain.usecases.reviews import WHY_NOT_A_REVIEWER
from sentinel_service.http.request import Call
from sentinel_service.http.routes import Route, path_params

HUMAN_REVIEWER = "reviewer (human)"


def admission_refusal(route: Route, event: dict[str, Any]) -> Refusal | None:
    """The refusal the use case would give for the caller's roles alone, or None (public routes, routes
    outside a project, and callers the route admits)."""
    project = path_params(route, event.get("rawPath", "")).get("project")
    if route.public or project is None:
        return None
    actor = Call.from_event(event).actor(project)
    try:
        if route.roles == HUMAN_REVIEWER:
            if not actor.roles:
                raise Refusal("NOT_FOUND", "no such project")
            refusal = reviewer_refusal(actor)
            if refusal:
                raise Refusal(refusal, WHY_NOT_A_REVIEWER[refusal])
        elif route.roles == "any":
            need(actor)
        else:
            need(actor, *(role.strip() for role in route.roles.split(",")))
    except Refusal as refusal:
        return refusal
    return None
