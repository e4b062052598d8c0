"""How a principal change and the chain events that record it commit together (DOMAIN.md rule 24: no
unaudited principal change survives a crash between two writes).

A change is two writes to two stores' worth of items: the principals (and their token hashes) and one event
on the chain of every project the principal holds a role in. Each store joins them its own way:

- SQLite: the principals and the chains are tables of one database file, so both run inside one
  `SqliteDatabase.atomic()` transaction; a crash anywhere before its COMMIT leaves neither.
- DynamoDB: the chain appends are staged (`DynamoStateStore.staged()`: built by the gate's ordinary append
  path, with every condition it puts on them, but not written) and handed to the principal admin as
  `extra_items`, so the principal's items and the events go in one TransactWriteItems. A chain that moved
  meanwhile cancels the whole transaction: the admin reports CONFLICT and nothing was written.

Any other pairing (a test's in-memory store) writes the change, then the events, and is not atomic."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from sentinel_service.adapters.principal_rules import PrincipalRefused

T = TypeVar("T")

MAX_TRANSACTION_ITEMS = 100  # DynamoDB's limit on one TransactWriteItems
PRINCIPAL_ITEMS = 3  # at most: the principal, a token written or deleted, the sponsor's condition check

ChangeWrite = Callable[[Sequence[dict[str, Any]]], T]


class PrincipalChanges(Protocol):
    """Run `change` (the admin's write, given the extra transaction items to carry) and `record` (the chain
    events, through the gate) so that both land or neither does."""

    def __call__(self, change: ChangeWrite[T], record: Callable[[], None]) -> T: ...


def sequential(change: ChangeWrite[T], record: Callable[[], None]) -> T:
    """Not atomic: only for stores that cannot join the two (tests' in-memory store)."""
    result = change(())
    record()
    return result


class SqliteChanges:
    """One SQLite transaction over the principals and the chains (they share one database file)."""

    def __init__(self, db: Any) -> None:
        self._db = db

    def __call__(self, change: ChangeWrite[T], record: Callable[[], None]) -> T:
        with self._db.atomic():
            result = change(())
            record()
        return result


class DynamoChanges:
    """The chain events staged, then written by the admin in the principal change's own transaction."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __call__(self, change: ChangeWrite[T], record: Callable[[], None]) -> T:
        with self._store.staged() as staged:
            record()
        if len(staged) + PRINCIPAL_ITEMS > MAX_TRANSACTION_ITEMS:
            # Refused before anything is written, rather than as a store fault from DynamoDB.
            raise PrincipalRefused(
                "TOO_MANY_PROJECTS",
                f"recording this change takes {len(staged)} chain items, more than one DynamoDB transaction "
                f"holds beside the principal's own {PRINCIPAL_ITEMS}: hold roles in fewer projects",
            )
        return change(list(staged))


def principal_changes(store: Any, admin: Any) -> PrincipalChanges:
    """The way this store and this admin commit a change with its events together."""
    from sentinel_service.adapters.dynamodb_store import DynamoStateStore
    from sentinel_service.adapters.principals import PrincipalAdmin
    from sentinel_service.adapters.sqlite_principals import SqlitePrincipalAdmin
    from sentinel_service.adapters.sqlite_store import SqliteStateStore

    if isinstance(store, SqliteStateStore) and isinstance(admin, SqlitePrincipalAdmin):
        if store.db is admin.db:
            return SqliteChanges(store.db)
    if isinstance(store, DynamoStateStore) and isinstance(admin, PrincipalAdmin):
        return DynamoChanges(store)
    return sequential
