"""The report's two largest sections, cold starts and store cost (see bench/report.py for the rest)."""

from typing import Any

from bench.report_format import _table, _usd


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
        "Per route of the ready flow (`client/src/sentinel_client/flow.py`, as `make demo` runs it), "
        "per request:",
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
            "one hook decision read (GET …/decision), both chains held: their HEADs read",
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
                "one hook decision read, both chains read in full (nothing held yet)",
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
        by = s.get("recorded_decision_by_findings", [])
        out += [
            f"A decision recorded while a new candidate holds ({hold['findings']} findings) writes "
            f"{hold['wru']:g} WRU. A recorded decision keeps digests, counts and chain positions, not "
            "its findings' prose (src/sentinel_domain/records.py), so the write no longer grows with the "
            "findings (computed from the exact items the store would write; in brackets the fact of e908c9a, "
            "every finding in full): "
            + ", ".join(
                f"{x['findings']:,} findings ({x['obligations']:,} obligations): {x['fact_bytes']:,} B fact, "
                f"{x['wru']:g} WRU ({x.get('fact_bytes_full', 0):,} B, {x.get('wru_full', 0):g} WRU)"
                for x in by
            )
            + ". With an Idempotency-Key the same transaction also completes the key's replay record, which "
            "keeps the whole answer, findings included (the answer is unchanged): "
            + ", ".join(
                f"+{x['replay_record_wru']:g} WRU at {x['findings']:,} findings"
                for x in by
                if "replay_record_wru" in x
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


def cold_start_packages(c: dict[str, Any]) -> list[str]:
    """bench/cold_start_packages.py: the zips as built, bytecode included, under the pinned CPython 3.13."""
    if not c.get("measured"):
        return [f"Not measured: {c.get('note', 'no reason given')}."]
    out = [
        f"The zips as built, unzipped as Lambda does, under `{c['interpreter']}` (CPython {c['python']}), "
        f"median of {c['runs']} fresh interpreters each, interleaved; {c['measures']}. Compiled extensions "
        f"swapped for this machine's build of the same versions: {len(c.get('extensions_swapped') or [])}. "
        f"Naive baseline: {c['naive_baseline_cpu_ms']} ms.",
        "",
    ]
    rows = [
        [
            f"`{name}`",
            h["built_cpu_ms"],
            h["without_bytecode_cpu_ms"],
            h["saved_ms"],
            f"× {h['built_vs_naive']}",
        ]
        for name, h in sorted(c["handlers"].items())
    ]
    return out + _table(["handler", "built, CPU ms", "without bytecode", "saved", "vs naive"], rows)
