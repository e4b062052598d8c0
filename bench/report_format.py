"""Formatting shared by the benchmark report's renderers (bench/report.py, bench/report_sections.py)."""

from typing import Any


def _v(value: Any, suffix: str = "") -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "**no**"
    if isinstance(value, float):
        text = f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 10 else f"{value:,.1f}"
        return text + suffix
    if isinstance(value, int):
        return f"{value:,}{suffix}"
    return f"{value}{suffix}"


def _usd(value: Any) -> str:
    return "—" if value is None else f"${value:,.2f}"


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_v(c) if not isinstance(c, str) else c for c in row) + " |" for row in rows]
    return out


def _failed(section: dict[str, Any] | None) -> str | None:
    if section is None:
        return "not run"
    if "error" in section:
        return "failed: " + section["error"].strip().splitlines()[-1][:300]
    return None
