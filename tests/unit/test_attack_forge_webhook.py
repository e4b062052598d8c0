"""Attacks on the webhook's receiving half (usecases.forge.receive_webhook): what a replayed body can do."""

from unit.test_forge_webhook_receive import FORGE_CONFIG, pull_request, receive

from support.world import World


def test_a_signed_body_replayed_under_another_delivery_id_is_a_duplicate() -> None:
    world = World(config=FORGE_CONFIG)
    # Given a delivery GitHub signed, accepted once
    body = pull_request()
    assert receive(world, body, delivery="11111111-2222-3333-4444-555555555555").status == "accepted"
    before = world.store.snapshot()
    # When someone who captured it sends the same signed bytes under a delivery id of their choosing
    again = receive(world, body, delivery="99999999-2222-3333-4444-555555555555")
    # Then it is a duplicate, and nothing is written
    assert again.status == "duplicate"
    assert world.store.snapshot() == before


def test_a_pull_requests_sender_is_kept_beside_its_author() -> None:
    from sentinel_domain.webhooks import parse_delivery

    # Given a synchronize that rita pushed to hank's pull request
    body = pull_request("synchronize", sender={"login": "rita"})
    # When it is parsed
    found = parse_delivery("pull_request", "d-1", body)
    # Then the worker learns both who opened it and who pushed its head
    assert (found.fields["author"], found.fields["sender"]) == ("octocat", "rita")  # type: ignore[union-attr]


def test_a_merge_groups_queue_branch_names_the_pull_request_it_tests() -> None:
    import json

    from sentinel_domain.webhooks import parse_delivery

    def merge_group(head_ref: object) -> bytes:
        group = {"base_sha": "b" * 40, "head_sha": "c" * 40, "head_ref": head_ref}
        payload = {"action": "checks_requested", "merge_group": group}
        return json.dumps(
            {**payload, "repository": {"full_name": "acme/payments"}, "installation": {"id": 7}}
        ).encode()

    # Given the queue's branch GitHub made for pull request 5
    found = parse_delivery(
        "merge_group", "d-1", merge_group(f"refs/heads/gh-readonly-queue/main/pr-5-{'a' * 40}")
    )
    # Then the worker learns which pull request it tests (and asks GitHub, not the payload, for its author)
    assert found.fields["pull_request"] == 5 and found.fields["author"] is None  # type: ignore[union-attr]
    # And a branch named otherwise names none
    other = parse_delivery("merge_group", "d-2", merge_group("refs/heads/main"))
    assert other.fields["pull_request"] is None  # type: ignore[union-attr]
