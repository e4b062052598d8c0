"""`python -m sentinel_client`, and what the single-file client (`sentinel-client.pyz`, `make client-zipapp`)
runs: `hook ...` is `sentinel-hook ...` (the Claude Code hook, `hook gate`, `hook evidence`); anything else
is `sentinel` (the persona commands)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["hook"]:
        from .hook import main as hook

        return hook(args[1:])
    from .cli import main as sentinel

    return sentinel(args)


if __name__ == "__main__":
    sys.exit(main())
