"""report.json -> report.md: the targets first, then one section per benchmark."""

import json
from typing import Any

BEGIN = "<!-- figures:begin (written by `.venv/bin/python -m bench --docs docs/benchmarks.md`) -->"
END = "<!-- figures:end -->"


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


# ---- the targets ----------------------------------------------------------------------------------------


def targets(report: dict[str, Any]) -> list[list[Any]]:
    s = report["sections"]
    rows: list[list[Any]] = []
    cold = s.get("cold_start")
    if cold and not _failed(cold):
        for mode, met in cold["target"]["met"].items():
            results = {k: v for k, v in cold["results"][mode].items() if "+" not in k and k != "naive"}
            worst = max(results, key=lambda k: results[k]["import_cpu_ratio"])
            wall = max(results, key=lambda k: results[k]["import_ratio"])
            base = cold["results"][mode]["naive"]
            rows.append(
                [
                    f"every handler imports in ≤ ½ the naive baseline's time ({mode})",
                    f"worst `{worst}` {results[worst]['import_cpu_ratio']:.2f}× CPU of "
                    f"{base['import_cpu_ms']['median']:,.0f} ms (wall: worst `{wall}` "
                    f"{results[wall]['import_ratio']:.2f}×)",
                    met,
                ]
            )
    cost = s.get("store_cost")
    if cost and not _failed(cost):
        t = cost["targets"]
        q = t["one_query_per_decision_read"]
        project_calls = q.get("project_calls", {})
        rows.append(
            [
                "one strongly consistent Query (plus pages) of the candidate and one GetItem of the "
                "project's HEAD per hook decision read",
                f"{q['candidate_queries']} Query, {q['candidate_pages']} page(s); project: "
                f"{', '.join(f'{k}×{v}' for k, v in project_calls.items()) or 'none'}; other partitions: "
                f"{', '.join(q['other_partitions']) or 'none'}",
                q["met"],
            ]
        )
        w = t["recorded_decision_write_units"]
        many = max(cost.get("recorded_decision_by_findings", []), key=lambda x: x["findings"], default=None)
        rows.append(
            [
                "a recorded decision ≤ 6 write units, audit event included",
                f"ready {w['wru']:g} WRU; hold with {w.get('hold_findings', '?')} findings "
                f"{w.get('hold_wru', 0):g} WRU"
                + (f" (but {many['wru']:g} WRU with {many['findings']:,} findings)" if many else ""),
                w["met"],
            ]
        )
        c = t.get("hook_read_cached_at_most_1_70")
        if c:
            rows.append(
                [
                    "a hook decision read, authorizer cached, ≤ $1.70 per million (DynamoDB prices since "
                    "2024-11-01)",
                    f"{_usd(c['usd_per_million'])} ({c['rru']:g} RRU, {c['function_billed_ms']:g} ms billed; "
                    f"{_usd(c['usd_per_million_project_read_in_full'])} with the project read in full)",
                    c["met"],
                ]
            )
        h = t["hook_read_under_2_50"]
        rows.append(
            [
                "a hook decision read under $2.50 per million",
                f"{_usd(h['usd_per_million'])} (authorizer cached: "
                f"{_usd(h['usd_per_million_authorizer_cached'])})",
                h["met"],
            ]
        )
    dec = s.get("decision_scaling")
    if dec and not _failed(dec):
        worst = max(dec["growth_product"], key=lambda g: g["exponent"] or 0, default=None)
        figure = f"exponent {worst['exponent']} ({worst['from']:,}→{worst['to']:,})" if worst else "—"
        rows.append(["decide() grows linearly or better", figure, dec["target"]["met"]])
    pkg = s.get("packages")
    if pkg and not _failed(pkg):
        if pkg.get("built"):
            biggest = max(pkg["packages"], key=lambda p: p.get("zipped_mb") or 0)
            combined = max((c["unzipped_with_layers_mb"] for c in pkg["combined"]), default=0)
            rows.append(
                [
                    "zips within Lambda's limits (50 MB zipped, 250 MB unzipped with layers)",
                    f"largest {biggest['package']} {biggest['zipped_mb']:.2f} MB zipped; function + layers "
                    f"{combined:.1f} MB unzipped",
                    pkg["target"]["met"],
                ]
            )
        else:
            rows.append(["zips within Lambda's limits", "not built", None])
    return rows


# ---- the sections ---------------------------------------------------------------------------------------


def cold_start(c: dict[str, Any]) -> list[str]:
    modes = list(c["results"])
    names = sorted((k for k in c["results"][modes[0]] if "+" not in k), key=lambda k: (k == "naive", k))
    label = {n: (f"`{n}`" if n != "naive" else "naive baseline") for n in names}
    out = [
        f"Fresh interpreters (`python {c['interpreter_flags']}`), median of {c['runs_per_figure']} runs "
        "each, interleaved with the baseline in shuffled order. Layout as on Lambda: "
        + c["layout"]
        + ". Modes: "
        + "; ".join(f"**{m}**: {d}" for m, d in c["modes"].items())
        + ". The target is judged on CPU time "
        "(`time.process_time()` around the import): on this shared machine the wall clock also counts the "
        "wait for a core. *init* adds what the first request builds lazily (Sentinel: the gate and its boto3 "
        "client; the authorizer: settings, token key and client; the baseline built all of it at import).",
        "",
        "Import, CPU ms (× the baseline):",
        "",
    ]
    rows = []
    for name in names:
        rows.append(
            [label[name]]
            + [
                f"{c['results'][m][name]['import_cpu_ms']['median']:,.0f} "
                f"({c['results'][m][name]['import_cpu_ratio']:.2f}×)"
                for m in modes
            ]
        )
    out += _table(["handler", *modes], rows)
    out += [
        "",
        "Wall-clock import × the baseline, and init (import + first-call setup) × the baseline's, CPU:",
        "",
    ]
    rows = []
    for name in names:
        rows.append(
            [label[name]]
            + [f"{c['results'][m][name]['import_ratio']:.2f}×" for m in modes]
            + [
                f"{c['results'][m][name]['init_cpu_ratio']:.2f}× "
                f"({c['results'][m][name]['init_cpu_ms']:,.0f} ms)"
                for m in modes
            ]
        )
    out += _table(["handler", *(f"{m} wall" for m in modes), *(f"{m} init" for m in modes)], rows)
    out += [
        "",
        "What each handler loads at import (from `sys.modules`) and where its import time goes "
        "(`-X importtime` in bytecode mode, self time summed per top-level package, ms):",
        "",
    ]
    rows = []
    for name in names:
        d = c["modules"].get(name, {})
        rows.append(
            [
                label[name],
                d.get("modules"),
                ", ".join(d.get("heavy", [])) or "—",
                ", ".join(d.get("powertools", [])) or "—",
                ", ".join(f"{k} {v:g}" for k, v in d.get("importtime_top_ms", [])[:5]) or "—",
            ]
        )
    out += _table(["handler", "modules", "heavy modules loaded", "Powertools parts", "top import time"], rows)
    kinds = [n for n in names if c["modules"].get(n, {}).get("importtime_by_kind_ms")]
    if kinds:
        columns = list(c["modules"][kinds[0]]["importtime_by_kind_ms"])
        out += [
            "",
            "The same self times by kind of package (ms, bytecode mode; these are wall-clock times of a "
            "traced run, inflated by tracing and by the machine's load: read them as proportions):",
            "",
        ]
        rows = [
            [
                label[n],
                *(c["modules"][n]["importtime_by_kind_ms"].get(k) for k in columns),
                round(sum(c["modules"][n]["importtime_by_kind_ms"].values()), 1),
            ]
            for n in kinds
        ]
        out += _table(["handler", *columns, "total"], rows)
    ship = c.get("shipping_bytecode", {})
    if ship.get("import_cpu_ms_by_handler"):
        out += [
            "",
            "Shipping bytecode in the layers and the function package (today's zips hold no .pyc, and "
            "/opt and /var/task are read-only, so every cold start compiles them): import CPU ms as deployed "
            "(lambda) and with bytecode. The deps layer's .pyc would add about "
            f"{ship.get('deps_layer_pyc_mb')} MB (sources {ship.get('deps_layer_source_mb')} MB), sentinel/ "
            f"and functions/ {ship.get('core_and_functions_pyc_mb')} MB.",
            "",
        ]
        rows = [
            [
                label[n],
                ship["import_cpu_ms_by_handler"][n]["lambda_ms"],
                ship["import_cpu_ms_by_handler"][n]["bytecode_ms"],
                ship["import_cpu_ms_by_handler"][n]["saved_ms"],
            ]
            for n in names
            if n in ship["import_cpu_ms_by_handler"]
        ]
        out += _table(["handler", "as deployed (ms)", "with .pyc (ms)", "saved ms"], rows)
    props = [p for p in c.get("proposals", []) if p.get("applied")]
    if props:
        out += [
            "",
            "Proposed product changes, measured on patched copies in the same run (import CPU ms, "
            "median; wall ms in brackets):",
            "",
        ]
        rows = []
        for p in props:
            for mode, targets_ in p["by_mode"].items():
                for target, g in targets_.items():
                    rows.append(
                        [
                            p["variant"],
                            f"`{target}`",
                            mode,
                            f"{g['before_ms']:,.0f} ({g['before_wall_ms']:,.0f})",
                            f"{g['after_ms']:,.0f} ({g['after_wall_ms']:,.0f})",
                            g["saved_ms"],
                            f"{g['ratio']:.2f}",
                        ]
                    )
        out += _table(["change", "handler", "mode", "before", "after", "saved ms", "after/before"], rows)
        out += [""] + [f"- **{p['variant']}**: {p['description']}." for p in props]
    return out


def store_cost(s: dict[str, Any]) -> list[str]:
    p, a = s["prices"], s["assumptions"]
    out = [
        "In-process on moto: the real handlers behind the emulated API Gateway with the real authorizer, the "
        "gate over DynamoStateStore over a metering client. Units: "
        + s["method"]["units"]
        + ". Durations: "
        + s["method"]["durations"]
        + ". Warm-up: "
        + s["method"]["warm"]
        + ".",
        "",
        f"Prices ({p['region']}, as of {p['as_of']}): DynamoDB on demand "
        f"${p['dynamodb_on_demand_wru_per_million']} per million WRU and "
        f"${p['dynamodb_on_demand_rru_per_million']} per million RRU ({p['dynamodb_note']}); HTTP API "
        f"${p['http_api_per_million']:.2f} per million ({p['http_api_note']}); Lambda arm64 "
        f"${p['lambda_arm64_gb_second']} per GB-s and ${p['lambda_requests_per_million']:.2f} per million "
        f"requests ({p['lambda_note']}). Assumed: {a['lambda_memory_mb']} MB functions "
        f"({a['lambda_memory_source']}; local compute × {a['cpu_scale']}), DynamoDB latency per call "
        + ", ".join(f"{k} {v:g} ms" for k, v in a["dynamodb_latency_ms"].items())
        + f", cold starts {a['cold_start_share']:.0%} of invocations"
        + (" (INIT from this run's cold-start section)" if s.get("init_ms_used") else " (INIT not included)")
        + f"; authorizer {a['authorizer']}.",
        "",
        "Per route of the ready flow (`client/flow.py`, as `make demo` runs it), per request:",
        "",
    ]
    rows = [
        [
            f"`{r_['route']}`",
            r_["requests"],
            ", ".join(f"{k}×{v}" for k, v in r_["calls_per_request"].items()),
            r_["rru_per_request"],
            r_["wru_per_request"],
            r_["function_compute_ms"],
            r_["function_billed_ms"],
            _usd(r_["usd_per_million_requests"]),
        ]
        for r_ in s["routes"]
    ]
    out += _table(
        [
            "route",
            "n",
            "DynamoDB calls (function)",
            "RRU",
            "WRU",
            "local ms",
            "billed ms (est.)",
            "$ per million",
        ],
        rows,
    )
    out += [
        "",
        "Every request also runs the authorizer: "
        + ", ".join(f"{k}×{v}" for k, v in s["routes"][0]["authorizer_calls"].items())
        + f" on the principals table ({s['hook_decision_read']['authorizer_rru']:g} RRU).",
        "",
    ]
    h, hc, rd = s["hook_decision_read"], s["hook_decision_read_authorizer_cached"], s["recorded_decision"]
    f, fc = s["ready_flow"], s["ready_flow_authorizer_cached"]
    rows = [
        [
            "one hook decision read (GET …/decision), the project's HEAD read",
            h["rru"] + h["authorizer_rru"],
            h["wru"],
            _usd(h["usd_per_million_total"]),
            _usd(hc["usd_per_million_total"]),
            _usd(h["usd_per_million_total_current_dynamodb"]),
            _usd(hc["usd_per_million_total_current_dynamodb"]),
        ],
    ]
    hf, hfc = (
        s.get("hook_decision_read_project_in_full"),
        s.get("hook_decision_read_project_in_full_authorizer_cached"),
    )
    if hf and hfc:
        rows.append(
            [
                "one hook decision read, the project's chain read in full (nothing held yet)",
                hf["rru"] + hf["authorizer_rru"],
                hf["wru"],
                _usd(hf["usd_per_million_total"]),
                _usd(hfc["usd_per_million_total"]),
                _usd(hf["usd_per_million_total_current_dynamodb"]),
                _usd(hfc["usd_per_million_total_current_dynamodb"]),
            ]
        )
    rows += [
        [
            "one recorded decision (POST …/decisions)",
            rd["rru"] + rd["authorizer_rru"],
            rd["wru"],
            _usd(rd["usd_per_million_total"]),
            "—",
            _usd(rd["usd_per_million_total_current_dynamodb"]),
            "—",
        ],
        [
            f"one complete ready flow ({f['requests']} requests)",
            f["rru"],
            f["wru"],
            _usd(f["usd_per_million"]),
            _usd(fc["usd_per_million"]),
            _usd(f["usd_per_million_current_dynamodb"]),
            _usd(fc["usd_per_million_current_dynamodb"]),
        ],
    ]
    out += _table(
        [
            "per million of",
            "RRU each",
            "WRU each",
            "$ (authorizer uncached)",
            "$ (authorizer cached)",
            "$ (uncached, current DynamoDB prices)",
            "$ (cached, current DynamoDB prices)",
        ],
        rows,
    )
    parts = h["usd_per_million"]
    out += [
        "",
        "A hook decision read, per million: "
        + ", ".join(f"{k.replace('_', ' ')} {_usd(v)}" for k, v in parts.items())
        + "; with the authorizer's cache, at current DynamoDB prices: "
        + ", ".join(
            f"{k.replace('_', ' ')} {_usd(v)}"
            for k, v in hc.get("usd_per_million_current_dynamodb", {}).items()
        )
        + ". A complete flow: "
        + ", ".join(f"{k.replace('_', ' ')} {_usd(v)}" for k, v in f["breakdown_usd_per_million"].items())
        + ".",
        "",
    ]
    items = s.get("recorded_decision_items", [])
    if items:
        out += [
            "The recorded decision, call by call: "
            + "; ".join(
                f"{i['op']} {i['items']} item(s) {i['bytes']:,} B → {i['rru'] or i['wru']:g} "
                f"{'RRU' if i['rru'] else 'WRU'}"
                for i in items
            )
            + ".",
            "",
        ]
    parts_ = s.get("decision_read_partitions")
    if parts_:
        out += [
            "What a decision read reads: "
            + "; ".join(
                f"{k} partition {v['items']} items, {v['bytes']:,} B, {v['rru']:g} RRU (about "
                f"{v['bytes_per_item']:,.0f} B per item: one more RRU every {v['items_per_extra_rru']:g} "
                "items)"
                for k, v in parts_.items()
            )
            + ".",
            "",
        ]
    hold = s.get("recorded_hold_decision")
    if hold:
        out += [
            f"A decision recorded while a new candidate holds ({hold['findings']} findings) writes "
            f"{hold['wru']:g} WRU; the write grows with the findings it records (computed from the exact "
            "items the store would write): "
            + ", ".join(
                f"{x['findings']:,} findings ({x['fact_bytes']:,} B fact) → {x['wru']:g} WRU"
                for x in s.get("recorded_decision_by_findings", [])
            )
            + ".",
            "",
        ]
    packed = s.get("decision_read_with_compressed_facts")
    if packed:
        units = (
            f"still {packed['rru']:g} RRU (4 KB rounding)"
            if packed["rru_compressed"] == packed["rru"]
            else f"{packed['rru_compressed']:g} RRU instead of {packed['rru']:g}"
        )
        out += [
            f"With every fact stored zlib-compressed (binary) the same decision read would be "
            f"{packed['bytes_compressed']:,} B instead of {packed['bytes']:,} B ({packed['ratio']:.0%}): "
            f"{units}; large candidates gain more (table below).",
            "",
        ]
    growth = s.get("decision_read_growth", [])
    if growth:
        out += [
            "A decision read grows with the decisions recorded before it (each is a fact on the candidate's "
            "chain): "
            + ", ".join(
                f"{g['recorded_decisions']} recorded → {g['rru']:g} RRU ({g['bytes_read']:,} B)"
                for g in growth
            )
            + ".",
            "",
        ]
    large = s.get("large_candidates", [])
    if large:
        out += [
            "Large candidates (seeded with batch writes; moto's time shown apart, it is not DynamoDB's), one "
            "decision read through the Gate:",
            "",
        ]
        rows = [
            [
                g["obligations"],
                g["items"],
                g["seed_batch_write_s"],
                g["decision"],
                g["candidate_queries"],
                g["candidate_pages"],
                g.get("project_read", "whole chain"),
                f"{g['bytes_read']:,}",
                g["rru"],
                g.get("rru_with_compressed_facts"),
                g["compute_ms"],
                g["store_ms_moto"],
                g["estimated_billed_ms"],
                _usd(g["usd_per_million_reads_cached_authorizer"]),
            ]
            for g in large
        ]
        out += _table(
            [
                "obligations = evidence",
                "items",
                "seed s",
                "decision",
                "candidate Queries",
                "pages",
                "project read",
                "bytes read",
                "RRU",
                "RRU, facts compressed",
                "compute ms",
                "moto ms",
                "billed ms (est.)",
                "$ per million reads (auth. cached)",
            ],
            rows,
        )
    return out


def decision_scaling(d: dict[str, Any]) -> list[str]:
    rows = []
    for row in d["rows"]:
        product = (
            row["product_ms"]
            if row.get("product_ms") is not None
            else f"~{row['product_projected_ms']:,.0f} (projected)"
        )
        rows.append(
            [
                row["obligations"],
                row["facts"],
                product,
                row["indexed_ms"],
                row.get("speedup"),
                row.get("decision"),
                row.get("indexed_equal"),
            ]
        )
    out = [
        "`decide()` alone on folded states (bench/fixtures.py: the fallback plan, one verified passing JUnit "
        "evidence per check, one passing report per task, so every check is judged and the decision is "
        "`ready`); median of repeated runs with the fixture frozen out of the garbage collector.",
        "",
    ]
    out += _table(
        [
            "obligations = evidence",
            "facts",
            "decide() ms",
            "indexed ms (proposal)",
            "speed-up",
            "decision",
            "same output",
        ],
        rows,
    )
    out += [
        "",
        "Growth: product "
        + ", ".join(
            f"{g['from']:,}→{g['to']:,} ×{g['time_ratio']} (exponent {g['exponent']})"
            for g in d["growth_product"]
        )
        + "; indexed "
        + ", ".join(
            f"{g['from']:,}→{g['to']:,} ×{g['time_ratio']} (exponent {g['exponent']})"
            for g in d["growth_indexed"]
        )
        + ".",
        "",
        f"Equivalence: on {d['equivalence']['fixture']} ({d['equivalence']['decision']}, "
        f"{d['equivalence']['findings']} findings) the indexed decision is identical: "
        f"{_v(d['equivalence']['indexed_equal'])}.",
        "",
        "**Where it was quadratic** (fixed since: decisions now index once): " + d["quadratic_spot"],
        "",
        "**The fix, as applied.** " + d["fix"],
    ]
    return out


def audit_verify(a: dict[str, Any]) -> list[str]:
    rows = [
        [row["events"], row["build_s"], row["verify_s"], f"{row['events_per_s']:,.0f}", row["us_per_event"]]
        for row in a["rows"]
    ]
    return (
        [
            "`AuditChain.verify` over valid synthetic chains built with `audit.next_event` ("
            + a["note"]
            + ").",
            "",
        ]
        + _table(["events", "build s", "verify s", "events per s", "µs per event"], rows)
        + ["", f"×{a['growth']['size_ratio']:g} the events: ×{a['growth']['time_ratio']:g} the time."]
    )


def e2e(e: dict[str, Any]) -> list[str]:
    out = [
        "Over HTTP: `sentinel serve --seed --rate 0` (embedded store, loopback), a ready candidate from the "
        f"client's flow, then N threads with their own client calling GET …/decision for "
        f"{e['bounds']['seconds_per_level']:g} s each (at most {e['bounds']['max_requests_per_thread']:,} "
        "requests a thread). " + e["note"] + ".",
        "",
    ]
    rows = [
        [
            row["threads"],
            row["requests"],
            row["rps"],
            row["p50_ms"],
            row["p90_ms"],
            row["p99_ms"],
            ", ".join(f"{k}: {v}" for k, v in row["statuses"].items()),
        ]
        for row in e["http"]["rows"]
    ]
    out += _table(["threads", "requests", "req/s", "p50 ms", "p90 ms", "p99 ms", "statuses"], rows)
    out += [
        "",
        "In-process (same handlers behind LocalGateway, " + e["in_process"]["store"] + "), the store's share "
        "of each request:",
        "",
    ]
    rows = [
        [
            row["threads"],
            row["requests"],
            row["rps"],
            row["p50_ms"],
            row["p99_ms"],
            row.get("store_ms_per_request"),
            f"{row.get('store_share_with_lock_wait', 0):.0%}",
            f"{row.get('store_share_service_time', 0):.0%}",
        ]
        for row in e["in_process"]["rows"]
    ]
    out += _table(
        [
            "threads",
            "requests",
            "req/s",
            "p50 ms",
            "p99 ms",
            "store ms / request",
            "store share (with lock wait)",
            "store share (moto service time)",
        ],
        rows,
    )
    return out


def packages(p: dict[str, Any]) -> list[str]:
    if not p.get("built"):
        return [p.get("note", "not built")]
    rows = [
        [
            f"`{row['path']}`",
            row.get("kind"),
            row.get("zipped_mb"),
            row.get("unzipped_mb"),
            row.get("entries"),
            row.get("pyc_files"),
            row.get("sha256_matches_digests"),
            ", ".join(f"{k} {v:g}" for k, v in row.get("largest_mb", [])[:3]),
        ]
        for row in p["packages"]
    ]
    out = _table(
        [
            "zip",
            "kind",
            "zipped MB",
            "unzipped MB",
            "entries",
            ".pyc",
            "sha256 = digests.json",
            "largest (MB unzipped)",
        ],
        rows,
    )
    out += [
        "",
        "Function package with every layer, unzipped: "
        + ", ".join(
            f"{c['function_package']} {c['unzipped_with_layers_mb']:g} MB of 250" for c in p["combined"]
        )
        + f". Runtime: {p.get('runtime')}. {p.get('note', '')}",
    ]
    return out


def _timed_entries(value: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every object with a median_ms, with its path: what an ingestion report's figures are."""
    if isinstance(value, dict):
        if "median_ms" in value:
            return [(path, value)]
        out = []
        for key, inner in value.items():
            out += _timed_entries(inner, f"{path} / {key}" if path else str(key))
        return out
    return []


def ingestion(i: dict[str, Any]) -> list[str]:
    if "output" in i:
        return ["```", i["output"], "```"]
    entries = _timed_entries({k: v for k, v in i.items() if k != "seconds"})
    if not entries:
        return ["```json", json.dumps({k: v for k, v in i.items() if k != "seconds"}, indent=1)[:4000], "```"]
    extras = [
        k for k in ("mb_per_s", "cases_per_s", "peak_python_mb", "code") if any(k in e for _, e in entries)
    ]
    rows = [[path, e.get("median_ms"), *(e.get(k) for k in extras)] for path, e in entries]
    return [
        f"Run as `{i.get('command', 'bench/bench_ingestion.py')}` (its own JSON: "
        "bench/results/ingestion.json); every figure with a median:",
        "",
    ] + _table(["figure", "median ms", *extras], rows)


SECTION_TITLES = (
    ("cold_start", "1. Cold import of each handler", cold_start),
    ("store_cost", "2. Store cost per operation and per million", store_cost),
    ("decision_scaling", "3. Decision scaling", decision_scaling),
    ("audit_verify", "4. Audit chain verification", audit_verify),
    ("e2e", "5. Local end-to-end: the hook's decision call", e2e),
    ("packages", "6. Package sizes", packages),
    ("ingestion", "7. Ingestion (bench/bench_ingestion.py)", ingestion),
)


def render(report: dict[str, Any]) -> str:
    m, g = report["machine"], report["git"]
    out = [
        "# Sentinel benchmarks",
        "",
        f"Generated {report['generated_at']} by `{report['command']}` in {report['seconds']:g} s, on commit "
        f"{g['commit'] or 'unknown'}{' with uncommitted changes' if g['dirty'] else ''}; Python "
        f"{m['python']}, {m['platform']}, {m['cpus']} CPUs, load average {m['load_at_start']} at start and "
        f"{m['load_at_end']} at the end. The machine is shared and noisy: every figure is measured in this "
        "one run next to its baseline, so compare ratios rather than milliseconds across runs."
        + (" **Quick run: fewer repetitions and smaller sizes.**" if report.get("quick") else ""),
        "",
        "## Targets",
        "",
    ]
    out += _table(["target", "figure", "met"], targets(report))
    for key, title, fn in SECTION_TITLES:
        section = report["sections"].get(key)
        if section is None:
            continue
        out += ["", f"## {title}", ""]
        problem = _failed(section)
        out += [problem] if problem else fn(section)
    return "\n".join(out) + "\n"


def replace_block(text: str, markdown: str) -> str:
    """Put the rendered figures between the markers (appended with them when absent); the title is dropped."""
    body = markdown.split("\n", 2)[2] if markdown.startswith("# ") else markdown
    body = body.replace("\n## ", "\n### ").replace("\n# ", "\n## ")
    block = f"{BEGIN}\n{body.strip()}\n{END}"
    if BEGIN in text and END in text:
        return text[: text.index(BEGIN)] + block + text[text.index(END) + len(END) :]
    return text.rstrip() + ("\n\n" if text.strip() else "") + block + "\n"
