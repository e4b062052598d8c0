"""The local gate's data directory and event log on a real file system: owned by one user, closed to others,
and its event log readable after a torn write."""

import json
import os
import stat
from pathlib import Path

import pytest

from sentinel_runner.data_dir import DataDirUnavailable, RunnerLock, open_data_dir
from sentinel_runner.relay import EventLog


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_directory_is_made_for_its_owner_alone(tmp_path: Path) -> None:
    # When a data directory is opened where none exists
    data = open_data_dir(tmp_path / "a" / "data")
    # Then it exists, 0700
    assert data.path.is_dir() and mode(data.path) == 0o700


def test_an_open_directory_of_ours_is_closed(tmp_path: Path) -> None:
    # Given a directory of ours that others may enter and write
    (tmp_path / "data").mkdir()
    (tmp_path / "data").chmod(0o777)
    # When it is opened as the data directory, Then it is closed to 0700
    assert mode(open_data_dir(tmp_path / "data").path) == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a directory to another user here")
def test_another_users_directory_is_refused(tmp_path: Path) -> None:
    # Given a directory that belongs to another user (nobody), open to all
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o777)
    os.chown(theirs, 65534, 65534)
    # When it is opened as the data directory, Then it is refused and left as it was
    with pytest.raises(DataDirUnavailable, match="belongs to another user"):
        open_data_dir(theirs)
    assert theirs.stat().st_uid == 65534


def test_one_runner_per_directory(tmp_path: Path) -> None:
    # Given a runner holding a data directory
    data = open_data_dir(tmp_path)
    first = RunnerLock(data).acquire()
    try:
        # When a second one tries, Then it is refused, naming the holder
        with pytest.raises(DataDirUnavailable, match=f"pid {os.getpid()}"):
            RunnerLock(data).acquire()
    finally:
        first.release()
    # And once the first lets go, another may take it
    RunnerLock(data).acquire().release()


def event(kind: str, n: int) -> dict:
    return {"source": "sentinel", "detail-type": f"sentinel.{kind}", "detail": {"n": n}}


def test_a_torn_last_line_never_swallows_the_next_event(tmp_path: Path) -> None:
    # Given an event log whose last line a full disk cut short, and a line that is not an event
    log_file = tmp_path / "events.jsonl"
    log_file.write_text(json.dumps(event("checkpoint", 1)) + "\n{}\n" + '{"source": "sentinel", "deta')
    # When a relay opens it and appends two events
    log = EventLog(log_file)
    log.publish(event("action", 2))
    log.publish(event("checkpoint", 3))
    # Then a later reader finds every whole event, the new ones included, and nothing else
    assert [e["detail"]["n"] for e in EventLog(log_file).events] == [1, 2, 3]
