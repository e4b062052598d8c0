"""A principal change and the chain events that record it land together or not at all (DOMAIN.md rule 24),
on the embedded SQLite store (one transaction over both; a process killed between the two writes) and on
DynamoDB on moto (one TransactWriteItems carrying the principal's items and the events)."""

import contextlib
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sentinel_domain.ports import StreamRef
from sentinel_service.adapters.principal_changes import DynamoChanges, SqliteChanges
from sentinel_service.adapters.principals import PrincipalRefused
from sentinel_service.adapters.tables import ensure_tables
from sentinel_service.compose import Services, compose
from sentinel_service.settings import Settings
from support.moto_world import moto_dynamodb
from support.world import sealed

KEY = bytes(range(32))


def open_sqlite(data: Path) -> Services:
    from sentinel_runner.data_dir import open_data_dir
    from sentinel_runner.runtime import open_embedded

    return open_embedded(open_data_dir(data), environ={"SENTINEL_TOKEN_KEY_FILE": str(data / "token.key")})


@pytest.fixture(params=["sqlite", "dynamodb"])
def services(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Services]:
    if request.param == "sqlite":
        made = open_sqlite(tmp_path / "data")
        yield made
        made.store.db.close()  # type: ignore[attr-defined]
        return
    with moto_dynamodb() as client:
        settings = Settings.from_env({"AWS_REGION": "us-east-1"})
        ensure_tables(client, settings.state_table, settings.principals_table)
        yield compose(settings, dynamodb=client, token_key=KEY, **sealed())


def events(services: Services, project: str) -> list[str]:
    stream: Any = services.store.load(StreamRef(project))
    return [event["type"] for event in stream.events]


def given_a_reviewer_in_two_projects(services: Services) -> str:
    operator = services.operator
    operator.create_project("shop")
    operator.create_project("pay")
    return operator.add_principal("rita", "human", None, {"shop": ["reviewer"], "pay": ["reviewer"]})


def test_the_operator_joins_each_change_with_its_events(services: Services) -> None:
    # Given the composed operator  Then it commits changes the store's atomic way, never one after the other
    from sentinel_service.adapters.sqlite_store import SqliteStateStore

    expected = SqliteChanges if isinstance(services.store, SqliteStateStore) else DynamoChanges
    assert isinstance(services.operator._changes, expected)


def test_a_failure_while_recording_leaves_the_principal_unchanged(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a reviewer with a live token, in two projects
    token = given_a_reviewer_in_two_projects(services)
    before = {p: events(services, p) for p in ("shop", "pay")}
    # When its compromised revocation fails while the second project's event is recorded
    original = services.gate.record_project_event
    calls: list[str] = []

    def fail_on_the_second(project: str, type_: str, payload: dict[str, Any]) -> Any:
        calls.append(project)
        if len(calls) == 2:
            raise RuntimeError("crash between the writes")
        return original(project, type_, payload)

    monkeypatch.setattr(services.gate, "record_project_event", fail_on_the_second)
    with pytest.raises(RuntimeError):
        services.operator.revoke("rita", compromised=True)
    # Then nothing was written: the principal is not revoked, its token still works, no chain moved
    stored = services.admin.get("rita")
    assert stored is not None and stored["revoked"] is False
    assert services.directory.authenticate(token, services.token_key(), services.now()) is not None
    assert {p: events(services, p) for p in ("shop", "pay")} == before
    # And once the fault is gone the same revocation lands with both events
    monkeypatch.setattr(services.gate, "record_project_event", original)
    services.operator.revoke("rita", compromised=True)
    assert all(events(services, p)[-1] == "principal.revoked" for p in ("shop", "pay"))
    assert services.directory.authenticate(token, services.token_key(), services.now()) is None


def test_a_failed_principal_write_records_no_event(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a reviewer in two projects
    given_a_reviewer_in_two_projects(services)
    before = {p: events(services, p) for p in ("shop", "pay")}

    # When the principal's own write fails (after the events were prepared)
    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise PrincipalRefused("CONFLICT", "injected")

    monkeypatch.setattr(services.admin, "rotate", refuse)
    with pytest.raises(PrincipalRefused):
        services.operator.rotate("rita")
    # Then no chain records a rotation that did not happen
    assert {p: events(services, p) for p in ("shop", "pay")} == before


def test_on_dynamodb_the_change_and_its_events_are_one_transaction(monkeypatch: pytest.MonkeyPatch) -> None:
    with moto_dynamodb() as client:
        # Given the operator over DynamoDB and a reviewer in two projects
        settings = Settings.from_env({"AWS_REGION": "us-east-1"})
        ensure_tables(client, settings.state_table, settings.principals_table)
        services = compose(settings, dynamodb=client, token_key=KEY, **sealed())
        given_a_reviewer_in_two_projects(services)
        transactions: list[set[str]] = []
        original = client.transact_write_items

        def spy(**kwargs: Any) -> Any:
            transactions.append({next(iter(op.values()))["TableName"] for op in kwargs["TransactItems"]})
            return original(**kwargs)

        monkeypatch.setattr(client, "transact_write_items", spy)
        # When it is revoked as compromised
        services.operator.revoke("rita", compromised=True)
        # Then one transaction wrote the principals table and both chains' events
        assert transactions == [{settings.principals_table, settings.state_table}]
        assert events(services, "shop")[-1] == events(services, "pay")[-1] == "principal.revoked"

        # And when that transaction fails, neither side is written
        def throttled(**_kwargs: Any) -> Any:
            raise ClientError({"Error": {"Code": "ThrottlingException"}}, "TransactWriteItems")

        monkeypatch.setattr(client, "transact_write_items", throttled)
        before = events(services, "shop")
        with pytest.raises(Exception):  # noqa: B017 - the store's fault, whatever class reports it
            services.operator.add_principal("rob", "human", None, {"shop": ["reviewer"]})
        monkeypatch.setattr(client, "transact_write_items", original)
        assert services.admin.get("rob") is None and events(services, "shop") == before


def test_a_chain_that_moves_before_the_transaction_is_judged_again(monkeypatch: pytest.MonkeyPatch) -> None:
    with moto_dynamodb() as client:
        # Given the operator over DynamoDB and a reviewer
        settings = Settings.from_env({"AWS_REGION": "us-east-1"})
        ensure_tables(client, settings.state_table, settings.principals_table)
        services = compose(settings, dynamodb=client, token_key=KEY, **sealed())
        given_a_reviewer_in_two_projects(services)
        # When another write lands on the project chain between staging and the principal's transaction
        original = services.admin.revoke
        raced: list[bool] = []

        def racing(*args: Any, **kwargs: Any) -> Any:
            if not raced:
                raced.append(True)
                services.gate.record_project_event("shop", "note.raced", {})
            return original(*args, **kwargs)

        monkeypatch.setattr(services.admin, "revoke", racing)
        services.operator.revoke("rita", compromised=False)
        # Then the first transaction was cancelled whole and the retry recorded the revocation after it
        assert events(services, "shop")[-2:] == ["note.raced", "principal.revoked"]
        assert events(services, "shop").count("principal.revoked") == 1


_CRASH = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    from test_principal_changes import open_sqlite
    services = open_sqlite(Path({data!r}))
    original = services.gate.record_project_event

    def die(*args, **kwargs):
        os._exit(9)  # the process dies after the principal's write, before any event: no cleanup runs

    services.gate.record_project_event = die
    services.operator.revoke("rita", True)
    """
)


def test_a_process_killed_between_the_writes_leaves_no_unaudited_change(tmp_path: Path) -> None:
    # Given the embedded store with a reviewer in two projects
    data = tmp_path / "data"
    services = open_sqlite(data)
    token = given_a_reviewer_in_two_projects(services)
    before = {p: events(services, p) for p in ("shop", "pay")}
    services.store.db.close()  # type: ignore[attr-defined]
    # When a process revoking it as compromised is killed after writing the principal, before the events
    here = str(Path(__file__).parent)
    script = _CRASH.format(tests=here, data=str(data))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([here, str(Path(here).parent), *sys.path])}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=60)
    assert done.returncode == 9, done.stderr.decode()
    # Then on the next open the principal is as it was, its token works, and no chain moved
    again = open_sqlite(data)
    try:
        stored = again.admin.get("rita")
        assert stored is not None and stored["revoked"] is False
        assert again.directory.authenticate(token, again.token_key(), again.now()) is not None
        assert {p: events(again, p) for p in ("shop", "pay")} == before
    finally:
        again.store.db.close()  # type: ignore[attr-defined]


def test_a_change_too_large_for_one_dynamodb_transaction_is_refused_before_any_write() -> None:
    # Given a store whose staged chain events fill 98 of a transaction's 100 items
    class Staging:
        @contextlib.contextmanager
        def staged(self) -> Iterator[list[dict[str, Any]]]:
            yield [{"Put": {}}] * 98

    written: list[Any] = []
    # When a change is run through it  Then it is refused with its own code and the admin is never called
    with pytest.raises(PrincipalRefused) as refused:
        DynamoChanges(Staging())(written.append, lambda: None)
    assert refused.value.code == "TOO_MANY_PROJECTS" and written == []
