"""Start `sentinel serve` with `sentinel_service` and `sentinel_domain` importable only from unzipped build
packages.

Run as a script under `python -I` (no PYTHONPATH, no current directory, no script directory on the path):

    python -I packaged_runner.py --task DIR --layer DIR --runner DIR -- serve [serve options]

`--task` holds the unzipped functions.zip (as Lambda's /var/task), `--layer` the unzipped core layer's
`python/` folder (as Lambda's /opt/python), `--runner` a copy of the runner's own packages (`sentinel_runner`,
`sentinel_gateway`, `sentinel_evaluation` whose CLI verb sentinel_runner.cli registers, and
`sentinel_client`, whose `sentinel` the runner's commands register into), which are not
part of the deployment. The repository's editable install would otherwise serve `sentinel_service` and
`sentinel_domain` from the source tree, so its import hooks are removed first. Before serving, every handler
is imported and the origin of every loaded `sentinel_service`, `sentinel_domain` and `sentinel_runner` module
is printed as one JSON line; a module from anywhere else stops the runner. Standard library only until the
hand-off.
"""

import argparse
import json
import os
import sys

ROOTS = (
    "sentinel_service",
    "sentinel_domain",
    "sentinel_runner",
    "sentinel_gateway",
    "sentinel_evaluation",
    "sentinel_client",
)


def _drop_editable_hooks() -> None:
    sys.meta_path[:] = [
        f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")
    ]
    sys.path_hooks[:] = [
        h for h in sys.path_hooks if not getattr(h, "__module__", "").startswith("__editable__")
    ]
    sys.path[:] = [p for p in sys.path if "__editable__" not in p]
    sys.path_importer_cache.clear()


def _origins(allowed: list[str]) -> tuple[dict[str, str], list[str]]:
    origins, outside = {}, []
    for name, module in sorted(sys.modules.items()):
        if name.split(".")[0] not in ROOTS:
            continue
        where = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", []) or []), "")
        real = os.path.realpath(where) if where else ""
        origins[name] = real
        if not any(real == root or real.startswith(root + os.sep) for root in allowed):
            outside.append(f"{name} from {real or 'nowhere'}")
    return origins, outside


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="packaged_runner")
    parser.add_argument("--task", required=True)
    parser.add_argument("--layer", required=True)
    parser.add_argument("--runner", required=True)
    parser.add_argument("serve", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    serve = args.serve[1:] if args.serve[:1] == ["--"] else args.serve
    roots = [os.path.realpath(p) for p in (args.task, args.layer, args.runner)]
    sys.dont_write_bytecode = True  # nothing written into the unzipped packages
    _drop_editable_hooks()
    sys.path[:0] = roots
    for root in ROOTS:
        sys.modules.pop(root, None)

    import importlib

    from sentinel_service import names
    from sentinel_service.http.routes import FUNCTIONS

    for function in (*FUNCTIONS, names.AUTHORIZER_FUNCTION):
        importlib.import_module(f"sentinel_service.handlers.{function}")
    import sentinel_runner.cli

    origins, outside = _origins(roots)
    print(
        json.dumps(
            {
                "packaged_runner": {
                    **{root: origins.get(root) for root in ROOTS[:3]},
                    "modules": len(origins),
                    "outside": outside,
                }
            }
        ),
        flush=True,
    )
    if outside:
        print(
            "packaged_runner: modules loaded from outside the packages: " + ", ".join(outside),
            file=sys.stderr,
        )
        return 3
    return int(sentinel_runner.cli.main(serve))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
