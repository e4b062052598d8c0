"""Part 6: the function and layer zips `make build` leaves under build/, against Lambda's limits: 50 MB zipped
for a direct upload, 250 MB unzipped for a function and all its layers together. Reads build/digests.json
and the zips; when neither exists the report says "not built"."""

import hashlib
import json
import zipfile
from pathlib import Path
from typing import Any

from bench.common import REPO, r, section_main

ZIPPED_LIMIT = 50 * 1024 * 1024
UNZIPPED_LIMIT = 250 * 1024 * 1024
MB = 1024 * 1024


def _largest(zf: zipfile.ZipFile, depth: int = 2, top: int = 5) -> list[tuple[str, float]]:
    sizes: dict[str, int] = {}
    for info in zf.infolist():
        key = "/".join(info.filename.split("/")[:depth])
        sizes[key] = sizes.get(key, 0) + info.file_size
    return [(k, r(v / MB, 2)) for k, v in sorted(sizes.items(), key=lambda kv: -kv[1])[:top]]


def run(_quick: bool) -> dict[str, Any]:
    build = REPO / "build"
    manifest_path = build / "digests.json"
    manifest: dict[str, Any] = {}
    if manifest_path.exists():
        try:
            manifest = json.loads(manifest_path.read_text())
        except ValueError:
            manifest = {}
    entries = manifest.get("packages", {}) if isinstance(manifest.get("packages"), dict) else {}
    paths: dict[str, Path] = {}
    for key, entry in entries.items():
        if isinstance(entry, dict) and entry.get("path"):
            paths[key] = REPO / str(entry["path"])
    for path in sorted(build.glob("*.zip")) if build.exists() else []:
        if path not in paths.values():
            paths[path.stem] = path
    if not paths:
        return {
            "built": False,
            "note": "not built: no build/digests.json and no zip under build/ (run `make build`)",
        }
    rows = []
    for key, path in sorted(paths.items()):
        if not path.exists():
            rows.append({"package": key, "path": str(path.relative_to(REPO)), "missing": True})
            continue
        data = path.read_bytes()
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            unzipped = sum(i.file_size for i in infos)
            largest = _largest(zf)
            pyc = sum(1 for i in infos if i.filename.endswith(".pyc"))
        expected = entries.get(key, {}).get("sha256") if isinstance(entries.get(key), dict) else None
        sha = hashlib.sha256(data).hexdigest()
        rows.append(
            {
                "package": key,
                "path": str(path.relative_to(REPO)),
                "kind": "layer" if "layer" in key else "function",
                "zipped_mb": r(len(data) / MB, 3),
                "unzipped_mb": r(unzipped / MB, 3),
                "entries": len(infos),
                "pyc_files": pyc,
                "sha256_matches_digests": None if expected is None else expected == sha,
                "zipped_share_of_50mb": r(len(data) / ZIPPED_LIMIT, 4),
                "largest_mb": largest,
            }
        )
    present = [row for row in rows if not row.get("missing")]
    layers = [row for row in present if row["kind"] == "layer"]
    functions = [row for row in present if row["kind"] == "function"]
    # Every function ships the one function package with every layer (infra attaches both layers to each).
    combined = [
        {
            "function_package": f["package"],
            "unzipped_with_layers_mb": r(f["unzipped_mb"] + sum(layer["unzipped_mb"] for layer in layers), 2),
        }
        for f in functions
    ]
    within = all(row["zipped_mb"] * MB <= ZIPPED_LIMIT for row in present) and all(
        c["unzipped_with_layers_mb"] * MB <= UNZIPPED_LIMIT for c in combined
    )
    return {
        "built": True,
        "runtime": manifest.get("runtime"),
        "packages": rows,
        "combined": combined,
        "limits": {"zipped_direct_upload_mb": 50, "unzipped_with_layers_mb": 250},
        "target": {
            "rule": "every zip under 50 MB; function plus layers under 250 MB unzipped",
            "met": within,
        },
        "note": "boto3 and botocore come from the Lambda runtime and are not in these zips"
        if "deps_layer" in entries
        else "",
    }


if __name__ == "__main__":
    section_main("packages", run)
