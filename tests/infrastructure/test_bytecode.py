"""The packages ship CPython 3.13 bytecode beside every module, compiled so that Lambda's 3.13 loads it as it
is (unchecked hashes, the paths Lambda loads from), from one pinned interpreter, and a build without that
interpreter stops and says how to get it.

The tests that read the bytecode skip, saying why, when this machine has no CPython 3.13 (the run's build then
carries none); the refusal tests run everywhere."""

import json
import subprocess
import zipfile
from pathlib import Path, PurePosixPath

import pytest

from sentinel_infra import packaging, runtime
from support.bytecode import requires_bytecode
from support.infra import STACK, Synthesized

LOAD_ROOTS = {
    packaging.FUNCTIONS_ZIP: "/var/task",
    packaging.CORE_LAYER_ZIP: "/opt",
    packaging.DEPS_LAYER_ZIP: "/opt",
}


def beside(source: str) -> str:
    """Where CPython 3.13 looks for a module's bytecode: `a/b.py` -> `a/__pycache__/b.cpython-313.pyc`."""
    path = PurePosixPath(source)
    return str(path.parent / "__pycache__" / f"{path.stem}.cpython-313.pyc").removeprefix("./")


def assert_bytecode_beside_every_module(zip_path: Path) -> None:
    with zipfile.ZipFile(zip_path) as archive:
        names = set(archive.namelist())
    sources = {n for n in names if n.endswith(".py")}
    compiled = {n for n in names if n.endswith(".pyc")}
    assert sources, zip_path
    # Every module has its 3.13 bytecode where the import system looks, and no bytecode lacks its module
    assert {s for s in sources if beside(s) not in compiled} == set(), zip_path
    assert compiled == {beside(s) for s in sources}, zip_path


def test_every_module_of_every_zip_ships_its_313_bytecode_beside_it(built: Path) -> None:
    requires_bytecode(built)
    # Given each built zip, then each `*.py` entry has its `__pycache__/*.cpython-313.pyc` beside it
    for zip_name in packaging.PACKAGES.values():
        assert_bytecode_beside_every_module(built / zip_name)
    # And the build records how it was compiled, with the one pinned interpreter
    manifest = json.loads((built / packaging.DIGESTS_FILE).read_text())
    assert manifest["bytecode"]["python"] == runtime.BYTECODE_PYTHON
    assert manifest["bytecode"]["invalidation_mode"] == "unchecked-hash"


def test_every_code_asset_the_template_deploys_carries_the_bytecode(synthesized: Synthesized) -> None:
    requires_bytecode(synthesized.build_dir)
    # Given the code of every function and layer in the template, followed to the asset CDK uploads
    assets = json.loads((synthesized.outdir / f"{STACK}.assets.json").read_text())["files"]
    by_key = {
        destination["objectKey"]: synthesized.outdir / asset["source"]["path"]
        for asset in assets.values()
        for destination in asset["destinations"].values()
    }
    codes = [p["Code"] for p in synthesized.properties("AWS::Lambda::Function")]
    codes += [p["Content"] for p in synthesized.properties("AWS::Lambda::LayerVersion")]
    keys = {code["S3Key"] for code in codes}
    assert len(keys) == 3  # the functions zip, shared by every function, and the two layers
    # Then each is a zip with the bytecode of every module beside it
    for key in keys:
        assert_bytecode_beside_every_module(by_key[key])


# Run under the pinned 3.13: for each (bytecode, source, expected path) the header and the code object.
_INSPECT = """
import importlib.util, json, marshal, sys
problems = []
for pyc, source, expected in json.load(sys.stdin):
    data = open(pyc, "rb").read()
    if data[:4] != importlib.util.MAGIC_NUMBER:
        problems.append(f"{expected}: not this interpreter's magic number")
    if int.from_bytes(data[4:8], "little") != 0b01:  # hash-based, source never checked
        problems.append(f"{expected}: not unchecked-hash")
    if data[8:16] != importlib.util.source_hash(open(source, "rb").read()):
        problems.append(f"{expected}: compiled from other bytes than the module beside it")
    if marshal.loads(data[16:]).co_filename != expected:
        problems.append(f"{expected}: names {marshal.loads(data[16:]).co_filename}")
print(json.dumps(problems))
"""


def test_the_bytecode_is_what_lambdas_313_loads_unchecked_from_the_path_it_loads_from(
    built: Path, tmp_path: Path
) -> None:
    requires_bytecode(built)
    python = packaging.find_bytecode_python()
    # Given every module and its bytecode, unzipped
    triples = []
    for zip_name, root in LOAD_ROOTS.items():
        folder = tmp_path / zip_name
        with zipfile.ZipFile(built / zip_name) as archive:
            archive.extractall(folder)
            sources = [n for n in archive.namelist() if n.endswith(".py")]
        triples += [(str(folder / beside(s)), str(folder / s), f"{root}/{s}") for s in sources]
    # When CPython 3.13 reads each one's header and code object
    done = subprocess.run(
        [*python.command, "-c", _INSPECT],
        input=json.dumps(triples),
        capture_output=True,
        text=True,
        check=True,
    )
    # Then each is 3.13's, hash-based and never checked against its source (a zip keeps no mtime; /var/task
    # and /opt are read-only), compiled from exactly the module beside it, and names the path Lambda loads it
    # from (tracebacks), never the build folder
    assert json.loads(done.stdout) == []
    assert len(triples) > 100


def test_no_bytecode_holds_the_folder_it_was_built_in(built: Path) -> None:
    requires_bytecode(built)
    # Given every compiled file of every zip
    for zip_name in packaging.PACKAGES.values():
        with zipfile.ZipFile(built / zip_name) as archive:
            for name in archive.namelist():
                if name.endswith(".pyc"):
                    # Then none mentions the build folder (its staging copy lived inside it)
                    assert str(built).encode() not in archive.read(name), name


def _fake_python(folder: Path, name: str, version: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / name
    script.write_text(f"#!/bin/sh\necho {version}\n")
    script.chmod(0o755)
    return script


def test_without_the_pinned_python_the_build_stops_and_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given no pyenv, no override, and only a python3.13 of another patch version on the PATH
    monkeypatch.delenv(packaging.PYTHON_OVERRIDE_ENV, raising=False)
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    _fake_python(tmp_path / "bin", "python3.13", "3.13.9")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    out = tmp_path / "out"
    # When the packages are built
    with pytest.raises(packaging.BytecodeUnavailable) as refused:
        packaging.build(out)
    # Then the build refuses, naming the pinned version, what it tried and how to get one
    message = str(refused.value)
    assert f"CPython {runtime.BYTECODE_PYTHON}" in message
    assert "-> 3.13.9" in message and f"pyenv install {runtime.BYTECODE_PYTHON}" in message
    assert packaging.PYTHON_OVERRIDE_ENV in message and "--no-bytecode" in message
    # And writes nothing that could be deployed
    assert not (out / packaging.DIGESTS_FILE).exists()
    # And the command line says so and fails
    assert packaging.main(["build", "--out", str(out)]) == 2
    assert f"CPython {runtime.BYTECODE_PYTHON}" in capsys.readouterr().err


def test_an_interpreter_named_explicitly_is_used_only_at_the_pinned_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given no pyenv and nothing on the PATH
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    # When the override names an interpreter of the pinned version, then that one compiles
    pinned = _fake_python(tmp_path / "pinned", "python", runtime.BYTECODE_PYTHON)
    monkeypatch.setenv(packaging.PYTHON_OVERRIDE_ENV, str(pinned))
    found = packaging.find_bytecode_python()
    assert (found.command, found.found_by) == ((str(pinned),), packaging.PYTHON_OVERRIDE_ENV)
    # When it names another 3.13, then it is refused: its marshal output could change every digest
    other = _fake_python(tmp_path / "other", "python", "3.13.5")
    monkeypatch.setenv(packaging.PYTHON_OVERRIDE_ENV, str(other))
    with pytest.raises(packaging.BytecodeUnavailable, match="3.13.5"):
        packaging.find_bytecode_python()
