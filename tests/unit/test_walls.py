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


PACKAGES = ("sentinel_domain", "sentinel_service", "sentinel_gateway", "sentinel_runner", "sentinel_client",
            "sentinel_infra", "sentinel_evaluation", "sentinel_acceptance")


def import_circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every group of modules that import each other, directly or not (Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(edges[module]):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return circles


def test_the_circle_finder_finds_a_circle() -> None:
    # Given a -> b -> c -> a beside a lone d -> a, When circles are sought, Then exactly a, b, c form one
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_of_any_room_is_in_an_import_circle() -> None:
    # Given every import between the project's modules, lazy ones inside functions included
    import grimp

    graph = grimp.build_graph(*PACKAGES)
    edges = {m: {i for i in graph.find_modules_directly_imported_by(m) if i in graph.modules} for m in graph.modules}
    # Then no two modules import each other, however indirectly
    assert import_circles(edges) == []


def test_the_route_table_and_the_names_import_only_the_standard_library() -> None:
    # Infra, the gateway, acceptance and evaluation read these without loading Powertools or a use case.
    for path in (ROOT / "src" / "sentinel_service" / "http" / "routes.py", ROOT / "src" / "sentinel_service" / "names.py"):
        tree = ast.parse(path.read_text())
        roots = {(a.name if isinstance(n, ast.Import) else n.module or "").split(".")[0]
                 for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom) for a in
                 (n.names if isinstance(n, ast.Import) else [n])}
        assert roots <= set(sys.stdlib_module_names), (path.name, roots - set(sys.stdlib_module_names))


def room_of(module: str) -> str:
    """A top-level package is a room; the service holds several (its HTTP edge, its adapters, its handlers)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "sentinel_service" and len(parts) > 2 else parts[0]


def test_no_room_imports_another_rooms_private_names() -> None:
    # Given every `from X import _name` in the project's modules
    offenders = []
    for package in PACKAGES:
        for path in sorted((ROOT / "src" / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT / "src").with_suffix("").parts).removesuffix(".__init__")
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    private = [a.name for a in node.names if a.name.startswith("_")]
                    if private and room_of(node.module) != room_of(module):
                        offenders.append(f"{module} imports {', '.join(private)} from {node.module}")
    # Then none reaches into another room's private names
    assert offenders == []


HTTP_WORDS = {"ETag", "Retry-After", "Idempotent-Replay", "status_code", "If-Match"}


def test_the_core_names_no_http_status_or_header() -> None:
    # Given every name and string constant the core's code uses (its docstrings and messages aside)
    offenders = []
    for path in sorted(CORE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in HTTP_WORDS:
                offenders.append(f"{path.name}: {node.value!r}")
            elif isinstance(node, ast.keyword | ast.Attribute | ast.Name):
                name = node.arg if isinstance(node, ast.keyword) else \
                    node.attr if isinstance(node, ast.Attribute) else node.id
                if name in ("status_code", "headers", "REFUSAL_STATUS", "TITLES"):
                    offenders.append(f"{path.name}: {name}")
    # Then none chooses a status or a header: the use cases answer typed outcomes and the edge answers HTTP
    assert offenders == []


def test_no_product_module_is_over_600_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "src").rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 600}
    assert long == {}
