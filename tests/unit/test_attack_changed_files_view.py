"""Red team: the reviewer's list of changed files (`changed_files.view`) shows at most 1,000 paths. An agent
that declares a thousand paths sorting before the real ones ("a/0001"...) must not push the attested change
out of the list the reviewer reads: attested paths are kept first, the declared ones fill what is left."""

from sentinel_domain import changed_files


def test_attack_declared_paths_cannot_crowd_the_attested_change_out_of_the_reviewers_list() -> None:
    # Given a declared context of 1,000 decoy paths and the attested one with the real change
    decoys = [f"a/{n:04d}.md" for n in range(changed_files.SHOWN)]
    contexts = [
        {"type": "candidate.created", "attested": False, "change": {"files": decoys}},
        {"type": "change_context.added", "attested": True, "change": {"files": ["services/payments/pay.py"]}},
    ]
    # When the reviewer's view is built
    view = changed_files.view(contexts)
    # Then it says the list is truncated, and the attested path is on it
    assert view["truncated"] is True and view["count"] == changed_files.SHOWN + 1
    assert "services/payments/pay.py" in view["files"] and len(view["files"]) == changed_files.SHOWN
    assert view["files"] == sorted(view["files"])
