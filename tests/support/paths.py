"""The repository root and the shared corpus, named once so that a test file can change folders freely."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO.parent / "shared" / "corpus"
