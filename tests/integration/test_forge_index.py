"""The repository index (sentinel_domain.ports.ForgeIndex) on each store (SQLite in a file, DynamoDB on moto):
first come owns a key, a second project gets the owner back, a claim by the owner again is not a conflict,
and the index lives apart from every project's chains and claims."""

from typing import Any

from sentinel_domain.ports import ForgeIndex, StreamRef
from sentinel_domain.webhooks import forge_index_key

KEY = forge_index_key(42, "Acme/Payments")


def test_the_first_project_owns_a_repository_key(store: Any) -> None:
    # Given an empty index on the store
    assert isinstance(store, ForgeIndex)
    assert store.forge_owner(KEY) is None
    # When one project claims the key, then another
    assert store.forge_claim(KEY, "alpha") == "alpha"
    assert store.forge_claim(KEY, "beta") == "alpha"
    # Then the first owns it, and claiming it again is not a conflict
    assert store.forge_claim(KEY, "alpha") == "alpha"
    assert store.forge_owner(KEY) == "alpha"
    # And another repository (or installation) is another key
    assert store.forge_claim(forge_index_key(43, "acme/payments"), "beta") == "beta"


def test_the_index_is_not_a_project_chain_or_a_claim(store: Any) -> None:
    store.forge_claim(KEY, "alpha")
    assert store.load(StreamRef("alpha")) is None
    assert store.find_claim("alpha", KEY) is None
    assert store.list_claims("alpha", 10, None) == ([], None)
