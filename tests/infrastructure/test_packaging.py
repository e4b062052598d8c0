"""Lambda packages: reproducible bytes, the layout Lambda expects, the digests Lambda reports, and a deps
layer that is exactly the locked runtime dependencies."""

import base64
import hashlib
import json
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest

from sentinel_infra import packaging, runtime
from sentinel_service.http.routes import FUNCTIONS
from support.infra import REPO


def test_building_twice_gives_identical_bytes_and_digests(built: Path, tmp_path: Path) -> None:
    # Given the run's first build, and an empty folder elsewhere (the deps layer's wheels come from
    # build/cache/)
    first = json.loads((built / packaging.DIGESTS_FILE).read_text())["packages"]
    bytecode = json.loads((built / packaging.DIGESTS_FILE).read_text())["bytecode"] is not None
    elsewhere = tmp_path / "another" / "folder"
    # When the packages are built again into it, bytecode included when the first build has it
    again = packaging.build(elsewhere, bytecode=bytecode)
    # Then every zip is byte-for-byte the same, and so are the digests recorded for it
    for key, zip_name in packaging.PACKAGES.items():
        assert (elsewhere / zip_name).read_bytes() == (built / zip_name).read_bytes(), zip_name
        assert (again[key].sha256, again[key].code_sha256) == (
            first[key]["sha256"],
            first[key]["code_sha256"],
        )
    second = json.loads((elsewhere / packaging.DIGESTS_FILE).read_text())["packages"]
    assert {k: v["sha256"] for k, v in second.items()} == {k: v["sha256"] for k, v in first.items()}


def test_digests_are_the_sha256_of_each_zip_in_hex_and_in_lambdas_base64(built: Path) -> None:
    # Given a build
    manifest = json.loads((built / packaging.DIGESTS_FILE).read_text())
    for key, zip_name in packaging.PACKAGES.items():
        # When a zip's bytes are hashed
        digest = hashlib.sha256((built / zip_name).read_bytes()).digest()
        entry = manifest["packages"][key]
        # Then digests.json holds that digest as hex, and as base64 (what Lambda reports as CodeSha256)
        assert entry["sha256"] == digest.hex()
        assert entry["code_sha256"] == base64.b64encode(digest).decode()
        assert entry["bytes"] == (built / zip_name).stat().st_size
    assert manifest["runtime"] == {
        "python": runtime.PYTHON_VERSION,
        "architecture": runtime.LAMBDA_ARCHITECTURE,
        "pip_platform": runtime.PIP_PLATFORM,
    }


def test_every_entry_is_sorted_with_fixed_time_and_mode(built: Path) -> None:
    for zip_name in packaging.PACKAGES.values():
        # Given a built zip
        with zipfile.ZipFile(built / zip_name) as archive:
            infos = archive.infolist()
        names = [i.filename for i in infos]
        # Then its entries are sorted files (no directories) with one timestamp, mode 0644 and a Unix origin
        assert names == sorted(names) and names, zip_name
        assert {i.date_time for i in infos} == {packaging.ZIP_DATE_TIME}
        assert {i.external_attr >> 16 for i in infos} == {0o100644}
        assert {i.create_system for i in infos} == {3}
        assert not [n for n in names if n.endswith("/")]
        # And the only bytecode is the runtime's (never the build interpreter's own cache)
        assert not [n for n in names if n.endswith(".pyc") and f".{runtime.BYTECODE_CACHE_TAG}." not in n]


def test_the_function_zip_holds_every_handler_at_the_path_lambda_imports(built: Path) -> None:
    # Given the functions zip
    with zipfile.ZipFile(built / packaging.FUNCTIONS_ZIP) as archive:
        names = set(archive.namelist())
    # Then each function's handler module is where `sentinel_service.handlers.<name>.handler` points
    for function in (*FUNCTIONS, "authorizer"):
        assert f"sentinel_service/handlers/{function}.py" in names
    assert "sentinel_service/handlers/__init__.py" in names
    # And it holds the service package and nothing else (the core ships in its layer)
    assert {n.split("/")[0] for n in names} == {"sentinel_service"}
    src = REPO / "src"
    expected = {
        p.relative_to(src).as_posix()
        for p in (src / "sentinel_service").rglob("*")
        if p.suffix in packaging.SOURCE_SUFFIXES and "__pycache__" not in p.parts
    }
    assert {n for n in names if not n.endswith(".pyc")} == expected


def test_the_core_layer_is_python_sentinel_domain(built: Path) -> None:
    # Given the core layer zip
    with zipfile.ZipFile(built / packaging.CORE_LAYER_ZIP) as archive:
        names = set(archive.namelist())
    src = REPO / "src"
    # Then it holds the domain core under python/sentinel_domain/, which Lambda puts on the path as
    # /opt/python
    assert {n for n in names if not n.endswith(".pyc")} == {
        "python/" + p.relative_to(src).as_posix()
        for p in (src / "sentinel_domain").rglob("*.py")
        if "__pycache__" not in p.parts
    }


def aarch64_elf(archive: zipfile.ZipFile, name: str) -> bool:
    with archive.open(name) as handle:
        header = handle.read(20)
    return header[:4] == b"\x7fELF" and int.from_bytes(header[18:20], "little") == 183  # EM_AARCH64


def test_the_deps_layer_holds_the_locked_packages_for_the_runtime_and_not_boto3(built: Path) -> None:
    # Given the deps layer zip
    with zipfile.ZipFile(built / packaging.DEPS_LAYER_ZIP) as archive:
        names = archive.namelist()
    top = {n.split("/")[1] for n in names}
    # Then everything sits under python/, with one .dist-info per locked package
    assert {n.split("/")[0] for n in names} == {"python"}
    installed = {
        packaging._normal(t.removesuffix(".dist-info").rsplit("-", 1)[0]): t.removesuffix(
            ".dist-info"
        ).rsplit("-", 1)[1]
        for t in top
        if t.endswith(".dist-info")
    }
    assert installed == packaging.parse_lock()
    # And the compiled extensions are the runtime's (CPython 3.13 on aarch64), not the build machine's: named
    # for it, or built for the stable ABI (cryptography's `.abi3.so`, whose name carries no machine) and then
    # an aarch64 ELF object (e_machine 183) by its header
    extensions = [n for n in names if n.endswith(".so")]
    tag = "cpython-" + runtime.PYTHON_VERSION.replace(".", "") + "-aarch64-linux-gnu"
    with zipfile.ZipFile(built / packaging.DEPS_LAYER_ZIP) as archive:
        wrong = [
            n for n in extensions if not (tag in n or (n.endswith(".abi3.so") and aarch64_elf(archive, n)))
        ]
    assert extensions and wrong == [], wrong
    # And boto3/botocore are left to the runtime
    assert not top & {"boto3", "botocore", "s3transfer"}


def test_the_lock_pins_pyprojects_runtime_dependencies_at_the_tested_versions() -> None:
    # Given the lock and pyproject.toml's [project].dependencies
    pins = packaging.parse_lock()
    wanted = {packaging._normal(r.split("==")[0]): r.split("==")[1] for r in packaging.runtime_requirements()}
    # Then every runtime dependency but boto3 is locked at its pyproject pin
    assert "boto3" not in wanted and wanted.items() <= pins.items()
    # And every locked package (transitive ones too) is the version the test suite runs against
    assert {name: version(name) for name in pins} == pins
    # And every pin carries its wheel's hash
    assert packaging.DEPS_LOCK.read_text().count("--hash=sha256:") == len(pins)


def test_a_missing_or_stale_build_is_refused_with_what_to_run(tmp_path: Path, built: Path) -> None:
    # Given no build at all, when it is read, then the refusal names the command to run
    with pytest.raises(FileNotFoundError, match="make build"):
        packaging.read_digests(tmp_path)
    # Given a build whose zip no longer matches its digest
    copy = tmp_path / "copy"
    copy.mkdir()
    manifest = json.loads((built / packaging.DIGESTS_FILE).read_text())
    for key, zip_name in packaging.PACKAGES.items():
        (copy / zip_name).write_bytes((built / zip_name).read_bytes())
        manifest["packages"][key]["path"] = str(copy / zip_name)
    (copy / packaging.FUNCTIONS_ZIP).write_bytes(b"changed")
    (copy / packaging.DIGESTS_FILE).write_text(json.dumps(manifest))
    # When it is read, then it is refused rather than deployed under the wrong digest
    with pytest.raises(ValueError, match="make build"):
        packaging.read_digests(copy)
