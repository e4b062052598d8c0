"""The HTTP edge's one mapping of refusals to problem documents: every code the core can refuse with has its
status and title there, one code answers in two ways only by its reason, and the retryable ones say when."""

import json

import pytest

from sentinel_domain.errors import IF_MATCH_MISSING, IF_MATCH_STALE, REFUSAL_CODES, Refusal
from sentinel_service.http.problems import (
    REFUSAL_STATUS,
    RETRY_AFTER,
    TITLES,
    problem_response,
    refusal_headers,
    refusal_status,
)


def test_every_refusal_code_has_exactly_one_status_and_title_at_the_edge() -> None:
    # Given the codes the core refuses with (DOMAIN.md)
    # Then the edge names a status and a title for each, and for nothing else
    assert set(REFUSAL_STATUS) == set(TITLES) == REFUSAL_CODES
    assert all(400 <= status < 600 for status in REFUSAL_STATUS.values())


@pytest.mark.parametrize(("reason", "status"), [(IF_MATCH_MISSING, 428), (IF_MATCH_STALE, 412), (None, 412)])
def test_a_version_conflict_is_428_without_if_match_and_412_when_stale(
    reason: str | None, status: int
) -> None:
    # Given a VERSION_CONFLICT refusal with its reason
    refusal = Refusal("VERSION_CONFLICT", "a detail the mapping never reads", reason=reason)
    # When the edge answers it
    response = problem_response(refusal)
    # Then the status follows the reason, the code stays the same, and the document says the same status
    body = json.loads(response.body)
    assert (response.status_code, body["status"], body["code"]) == (status, status, "VERSION_CONFLICT")
    assert refusal_status(refusal) == status


def test_the_retryable_refusals_say_when_to_retry_and_no_other_does() -> None:
    # Given one refusal of every code
    for code in sorted(REFUSAL_CODES):
        # When the edge answers it
        headers = problem_response(Refusal(code, "detail")).headers
        # Then only the retryable ones carry Retry-After
        assert headers.get("Retry-After") == RETRY_AFTER.get(code), code
        assert refusal_headers(Refusal(code, "detail")) == (
            {"Retry-After": "1"} if code in RETRY_AFTER else {}
        )
    assert set(RETRY_AFTER) == {"STATE_UNAVAILABLE", "IDEMPOTENCY_IN_PROGRESS"}


def test_the_core_refuses_an_unknown_code_or_a_reason_its_code_does_not_have() -> None:
    # When a refusal is made with a code outside DOMAIN.md, or a reason its code does not have
    # Then it is a programming error, caught where it is made
    with pytest.raises(ValueError):
        Refusal("NOT_A_CODE", "detail")
    with pytest.raises(ValueError):
        Refusal("NOT_FOUND", "detail", reason=IF_MATCH_MISSING)
