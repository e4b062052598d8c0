"""The walls of ARCHITECTURE.md that import-linter cannot express (it runs in `make lint` for the rest)."""

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "src" / "sentinel_domain"
CORE_ALLOWED = {"pydantic", "rfc8785", "defusedxml", "yaml"}


def imported_roots(folder: Path) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(path.name)
    return found


def test_the_domain_core_imports_only_the_standard_library_and_its_pure_dependencies() -> None:
    outside = {root: files for root, files in imported_roots(CORE).items()
               if root not in sys.stdlib_module_names and root not in CORE_ALLOWED and root != "sentinel_domain"}
    assert outside == {}


def test_the_domain_core_never_reads_the_environment() -> None:
    offenders = [p.name for p in CORE.rglob("*.py") if "os.environ" in p.read_text() or "getenv" in p.read_text()]
    assert offenders == []


def test_the_client_imports_only_the_standard_library() -> None:
    outside = {root: files for root, files in imported_roots(ROOT / "src" / "sentinel_client").items()
               if root not in sys.stdlib_module_names and root != "sentinel_client"}
    assert outside == {}


def test_no_module_builds_an_aws_client_at_import_time() -> None:
    # A boto3 client at module level would escape moto and cost every cold start.
    offenders = []
    for folder in ("sentinel_service", "sentinel_runner", "sentinel_domain"):
        for path in (ROOT / "src" / folder).rglob("*.py"):
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.Assign | ast.Expr) and "boto3.client(" in ast.unparse(node):
                    offenders.append(path.name)
    assert offenders == []
