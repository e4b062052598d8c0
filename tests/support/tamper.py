"""Ways to change an emulated deployment, for the tests that prove the gate catches what it exists to
catch."""

import hashlib
import json
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sentinel_acceptance.emulation import Asset, Synth
from sentinel_acceptance.target import read_build
from sentinel_service import names
from support.paths import REPO


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def functions_asset(synth: Synth, build: Path) -> Asset:
    """The asset that uploads functions.zip."""
    want = read_build(build)["functions"].sha256
    found = [a for a in synth.assets if a.path.suffix == ".zip" and sha256(a.path) == want]
    assert len(found) == 1, "the synth uploads functions.zip once (every function shares it)"
    return found[0]


def zip_with(
    source: Path,
    dest: Path,
    replace: dict[str, Callable[[str], str]] | None = None,
    extra: dict[str, str] | None = None,
) -> Path:
    """A copy of a zip with some files' text changed and some added, written as the build writes zips."""
    import sys

    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from sentinel_infra import packaging

    staging = dest.parent / (dest.stem + "-staging")
    with zipfile.ZipFile(source) as archive:
        archive.extractall(staging)
    for name, edit in (replace or {}).items():
        path = staging / name
        changed = edit(path.read_text())
        assert changed != path.read_text(), f"the edit of {name} changed nothing"
        path.write_text(changed)
    for name, text in (extra or {}).items():
        (staging / name).write_text(text)
    entries = [(p.relative_to(staging).as_posix(), p) for p in staging.rglob("*") if p.is_file()]
    packaging.write_zip(entries, dest)
    shutil.rmtree(staging)
    return dest


def build_with_functions(build: Path, functions_zip: Path, dest: Path) -> Path:
    """A build folder like `build`, whose functions.zip is another one (digests.json updated to match)."""
    dest.mkdir(parents=True, exist_ok=True)
    manifest = json.loads((build / "digests.json").read_text())
    for key, entry in manifest["packages"].items():
        source = functions_zip if key == "functions" else read_build(build)[key].path
        digest = hashlib.sha256(source.read_bytes()).digest()
        import base64

        entry.update(
            path=str(source.resolve()),
            sha256=digest.hex(),
            code_sha256=base64.b64encode(digest).decode(),
            bytes=source.stat().st_size,
        )
    (dest / "digests.json").write_text(json.dumps(manifest, indent=2))
    return dest


def retarget(template: dict[str, Any], old_digest: str, new_digest: str) -> None:
    """What a synth of the other build would state: its digest as every function's SENTINEL_PACKAGE_DIGEST and
    as the PackageDigest output (the asset's own key may keep its name: CloudFormation never reads it)."""
    text = json.dumps(template).replace(old_digest, new_digest)
    template.clear()
    template.update(json.loads(text))


def set_package_digest(template: dict[str, Any], digest: str) -> None:
    """Every function configured with another package digest than the zip it runs."""
    for resource in template["Resources"].values():
        env = resource.get("Properties", {}).get("Environment", {}).get("Variables", {})
        if names.ENV_PACKAGE_DIGEST in env:
            env[names.ENV_PACKAGE_DIGEST] = digest
