"""Fixtures of the hook tests; the helpers live in hookharness.py."""

from pathlib import Path

import pytest


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def token_file(home: Path) -> Path:
    path = home / "token"
    path.write_text("snt_" + "A" * 49 + "\n")
    path.chmod(0o600)
    return path
