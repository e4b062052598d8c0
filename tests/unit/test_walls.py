"""The walls of ARCHITECTURE.md that import-linter cannot express (it runs in `make lint` for the rest)."""

import ast
import sys
from pathlib import Path

from support.paths import REPO

ROOT = REPO
CORE = ROOT / "src" / "sentinel_domain"
# The client distribution's sources live in client/src; every other room's in src.
SOURCE_ROOTS = (ROOT / "src", ROOT / "client" / "src")


def source_of(package: str) -> Path:
    return next(
        (root / package for root in SOURCE_ROOTS if (root / package).is_dir()), ROOT / "src" / package
    )


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
    outside = {
        root: files
        for root, files in imported_roots(CORE).items()
        if root not in sys.stdlib_module_names and root not in CORE_ALLOWED and root != "sentinel_domain"
    }
    assert outside == {}


ENVIRONMENT_NAMES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def names_used(tree: ast.AST) -> set[str]:
    """Every name, attribute and imported name a module mentions."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.update({node.name.split(".")[-1], node.asname or ""})
    return found


def test_the_domain_core_never_reads_the_environment() -> None:
    # However it is spelled: os.environ, from os import environ, getenv, an alias of either
    offenders = {
        p.name: sorted(names_used(ast.parse(p.read_text())) & ENVIRONMENT_NAMES) for p in CORE.rglob("*.py")
    }
    assert {name: used for name, used in offenders.items() if used} == {}


def dynamic_imports(path: Path) -> list[str]:
    """importlib and __import__: what import-linter cannot follow."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [f"{path.name}: import {m}" for m in modules if m.split(".")[0] == "importlib"]
        elif isinstance(node, ast.Name) and node.id == "__import__":
            found.append(f"{path.name}: __import__")
    return found


def test_the_core_and_the_client_import_nothing_dynamically() -> None:
    # The client's package __init__ may load its own modules lazily, by names that are all its own
    lazy = ROOT / "client" / "src" / "sentinel_client" / "__init__.py"
    loaded = [
        n.value
        for n in ast.walk(ast.parse(lazy.read_text()))
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith("sentinel_client.")
    ]
    assert loaded and all(name.startswith("sentinel_client.") for name in loaded)
    offenders = [
        f
        for p in [*CORE.rglob("*.py"), *(ROOT / "client" / "src" / "sentinel_client").rglob("*.py")]
        if p != lazy
        for f in dynamic_imports(p)
        # `sentinel` finds the server's subcommands by their entry-point group: the one plug-in seam, and
        # what it loads is whatever the server distribution registered (sentinel_client/cli.py)
        if f != "cli.py: import importlib.metadata"
    ]
    assert offenders == []


def test_the_client_imports_only_the_standard_library() -> None:
    outside = {
        root: files
        for root, files in imported_roots(ROOT / "client" / "src" / "sentinel_client").items()
        if root not in sys.stdlib_module_names and root != "sentinel_client"
    }
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


PACKAGES = (
    "sentinel_domain",
    "sentinel_service",
    "sentinel_gateway",
    "sentinel_runner",
    "sentinel_client",
    "sentinel_infra",
    "sentinel_evaluation",
    "sentinel_acceptance",
)


def import_circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every group of modules that import each other, directly or not (Tarjan's strongly connected
    components)."""
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
    edges = {
        m: {i for i in graph.find_modules_directly_imported_by(m) if i in graph.modules}
        for m in graph.modules
    }
    # Then no two modules import each other, however indirectly
    assert import_circles(edges) == []


def test_the_route_table_and_the_names_import_only_the_standard_library() -> None:
    # Infra, the gateway, acceptance and evaluation read these without loading Powertools or a use case.
    for path in (
        ROOT / "src" / "sentinel_service" / "http" / "routes.py",
        ROOT / "src" / "sentinel_service" / "names.py",
    ):
        tree = ast.parse(path.read_text())
        roots = {
            (a.name if isinstance(n, ast.Import) else n.module or "").split(".")[0]
            for n in ast.walk(tree)
            if isinstance(n, ast.Import | ast.ImportFrom)
            for a in (n.names if isinstance(n, ast.Import) else [n])
        }
        assert roots <= set(sys.stdlib_module_names), (path.name, roots - set(sys.stdlib_module_names))


def room_of(module: str) -> str:
    """A top-level package is a room; the service holds several (its HTTP edge, its adapters, its
    handlers)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "sentinel_service" and len(parts) > 2 else parts[0]


def module_name(path: Path) -> str:
    root = next(r for r in SOURCE_ROOTS if path.is_relative_to(r))
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def private_reaches(path: Path, module: str | None = None) -> list[str]:
    """`from X import _name`, `from X._module import …`, and `alias._name` where alias is another room's
    module."""
    module = module or module_name(path)
    tree = ast.parse(path.read_text())
    found, aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] not in PACKAGES or room_of(node.module) == room_of(module):
                continue
            private = [a.name for a in node.names if a.name.startswith("_")]
            if private or any(part.startswith("_") for part in node.module.split(".")):
                found.append(f"{module} imports {', '.join(private) or '*'} from {node.module}")
            for a in node.names:  # `from pkg import module` binds another room's module
                top, _, rest = node.module.partition(".")
                if (source_of(top) / rest.replace(".", "/") / (a.name + ".py")).exists():
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in PACKAGES and room_of(a.name) != room_of(module):
                    aliases[a.asname or a.name.split(".")[0]] = a.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            if node.attr.startswith("_") and not node.attr.startswith("__"):
                found.append(f"{module} reaches {aliases[node.value.id]}.{node.attr}")
    return found


def test_the_private_name_check_sees_every_spelling(tmp_path: Path) -> None:
    # Given a module of the runner reaching into the service's privates three ways
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from sentinel_service.http.resolver import _problem\n"
        "import sentinel_service.http.resolver as r\n"
        "from sentinel_service.http import resolver\n"
        "x = r._invalid_body_code, resolver._early\n"
    )
    # When it is checked, Then each is named
    assert len(private_reaches(probe, "sentinel_runner.probe")) == 3


def test_no_room_imports_another_rooms_private_names() -> None:
    # Given every module of every room, Then none reaches into another room's private names, however spelled
    offenders = [
        f
        for package in PACKAGES
        for path in sorted(source_of(package).rglob("*.py"))
        for f in private_reaches(path)
    ]
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
                name = (
                    node.arg
                    if isinstance(node, ast.keyword)
                    else node.attr
                    if isinstance(node, ast.Attribute)
                    else node.id
                )
                if name in ("status_code", "headers", "REFUSAL_STATUS", "TITLES"):
                    offenders.append(f"{path.name}: {name}")
    # Then none chooses a status or a header: the use cases answer typed outcomes and the edge answers HTTP
    assert offenders == []


def test_no_product_module_is_over_600_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for root in SOURCE_ROOTS
        for p in root.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 600
    }
    assert long == {}
