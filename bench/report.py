"""report.json -> report.md: the targets first, then one section per benchmark."""

import json
from typing import Any

from bench.report_format import _failed, _table, _usd, _v
from bench.report_sections import cold_start, cold_start_packages, store_cost

BEGIN = "<!-- figures:begin (written by `.venv/bin/python -m bench --docs docs/benchmarks.md`) -->"
END = "<!-- figures:end -->"


# ---- the targets ----------------------------------------------------------------------------------------


def _calls(calls: dict[str, int]) -> str:
    return ", ".join(f"{k}×{v}" for k, v in calls.items()) or "none"


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
                "at most one strongly consistent Query (plus pages) of the candidate and one GetItem of the "
                "project's HEAD per hook decision read; one GetItem of each HEAD while both are unchanged",
                f"{q['candidate_queries']} Query, {q['candidate_pages']} page(s); project: "
                f"{', '.join(f'{k}×{v}' for k, v in project_calls.items()) or 'none'}; other partitions: "
                f"{', '.join(q['other_partitions']) or 'none'}"
                + (
                    f"; both held: candidate {_calls(q['held']['candidate_calls'])}"
                    f", project {_calls(q['held']['project_calls'])}"
                    if "held" in q
                    else ""
                ),
                q["met"],
            ]
        )
        w = t["recorded_decision_write_units"]
        many = max(cost.get("recorded_decision_by_findings", []), key=lambda x: x["findings"], default=None)
        rows.append(
            [
                "a recorded decision ≤ 6 write units, audit event included, whatever its findings",
                f"ready {w['wru']:g} WRU; hold with {w.get('hold_findings', '?')} findings "
                f"{w.get('hold_wru', 0):g} WRU"
                + (
                    f"; {many['findings']:,} findings {many['wru']:g} WRU (findings in full, as before: "
                    f"{many['wru_full']:g} WRU)"
                    if many and "wru_full" in many
                    else ""
                ),
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
                    f"{_usd(c['usd_per_million_candidate_read_in_full'])} with the candidate read in full, "
                    f"{_usd(c['usd_per_million_project_read_in_full'])} with both read in full)",
                    c["met"],
                ]
            )
        g = t.get("decision_read_after_30_recorded")
        if g and g.get("rru") is not None:
            rows.append(
                [
                    "recorded decisions barely grow later reads (a decision read after 30 of them)",
                    f"{g['rru']:g} RRU (after {g['recorded_before']}: {g['rru_before']:g} RRU)",
                    g["met"],
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
        t = dec["target"]
        rows.append(
            [
                f"decide() grows at most 10× from {t['from']:,} to {t['to']:,} obligations (CPU time, "
                "garbage collector frozen and off)",
                f"×{_v(t['ratio'])} (baseline e908c9a ×{_v(t['baseline_ratio'])}; a walk over the same facts "
                f"×{_v(t.get('control_ratio'))})",
                t["met"],
            ]
        )
    aud = s.get("audit_verify")
    if aud and not _failed(aud) and "target" in aud:
        t = aud["target"]
        rows.append([t["rule"], f"{_v(t['speedup'])}× faster than the baseline (e908c9a)", t["met"]])
    ing = s.get("ingestion")
    junit = (ing or {}).get("junit") if isinstance(ing, dict) else None
    if isinstance(junit, dict) and "speedup_vs_junitparser" in junit:
        rows.append(
            [
                "JUnit parse and classify ≥ 2× junitparser on the largest corpus report (CPU time)",
                f"{junit['speedup_vs_junitparser']:g}× ({junit['file']})",
                junit["target"]["met"],
            ]
        )
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


def decision_scaling(d: dict[str, Any]) -> list[str]:
    rows = [
        [
            row["obligations"],
            row["facts"],
            row["product_ms"],
            row["baseline_ms"],
            row.get("speedup"),
            row.get("control_ms"),
            row.get("product_wall_ms"),
            row.get("decision"),
            row.get("baseline_equal"),
        ]
        for row in d["rows"]
    ]
    out = [
        "`decide()` alone on folded states (bench/fixtures.py: the fallback plan, one verified passing JUnit "
        "evidence per check, one passing report per task, so every check is judged and the decision is "
        "`ready`), next to decide() as it was at e908c9a (bench/baselines.py) and a control that only walks "
        "the same facts; " + d["method"] + ".",
        "",
    ]
    out += _table(
        [
            "obligations = evidence",
            "facts",
            "decide() CPU ms",
            "baseline CPU ms",
            "speed-up",
            "control CPU ms",
            "decide() wall ms",
            "decision",
            "same output",
        ],
        rows,
    )

    def growth(key: str) -> str:
        return ", ".join(
            f"{g['from']:,}→{g['to']:,} ×{g['time_ratio']} (exponent {g['exponent']})" for g in d[key]
        )

    out += [
        "",
        f"Growth: decide() {growth('growth_product')}; baseline {growth('growth_baseline')}; control "
        f"{growth('growth_control')}.",
        "",
        f"Equivalence: on {d['equivalence']['fixture']} ({d['equivalence']['decision']}, "
        f"{d['equivalence']['findings']} findings) today's decision equals the baseline's: "
        f"{_v(d['equivalence']['baseline_equal'])}.",
        "",
        "**The baseline.** " + d["baseline"] + ".",
        "",
        "**The change.** " + d["fix"] + ".",
    ]
    return out


def audit_verify(a: dict[str, Any]) -> list[str]:
    rows = [
        [
            row["events"],
            row["build_s"],
            row["verify_s"],
            row["baseline_s"],
            row["speedup"],
            f"{row['events_per_s']:,.0f}",
            row["us_per_event"],
            row.get("verify_wall_s"),
        ]
        for row in a["rows"]
    ]
    return (
        [
            "`AuditChain.verify` over valid synthetic chains built with `audit.next_event`, next to the "
            "verifier of e908c9a (bench/baselines.py): " + a["note"] + ".",
            "",
        ]
        + _table(
            [
                "events",
                "build s",
                "verify CPU s",
                "baseline CPU s",
                "speed-up",
                "events per s",
                "µs per event",
                "verify wall s",
            ],
            rows,
        )
        + [
            "",
            f"×{a['growth']['size_ratio']:g} the events: ×{a['growth']['time_ratio']:g} the time.",
            "",
            "**The baseline.** " + a.get("baseline", "") + ". **The change.** " + a.get("fix", "") + ".",
        ]
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
    base = e.get("http_moto_baseline")
    if base:
        out += [
            "",
            "The same over HTTP on moto's server (the baseline: the local gate's store until now):",
            "",
        ]
        out += _table(
            ["threads", "requests", "req/s", "p50 ms", "p90 ms", "p99 ms", "statuses"],
            [
                [r["threads"], r["requests"], r["rps"], r["p50_ms"], r["p90_ms"], r["p99_ms"],
                 ", ".join(f"{k}: {v}" for k, v in r["statuses"].items())]
                for r in base["rows"]
            ],
        )  # fmt: skip
        goals = e.get("targets", {})
        ten, p99 = (
            goals.get("ten_times_the_moto_store_for_one_client"),
            goals.get("p99_under_50_ms_for_one_client"),
        )
        if ten and p99:
            out += [
                "",
                f"One client: {ten['rps']} req/s on SQLite against {ten['baseline_rps']} on moto "
                f"(×{ten['ratio']}; target ×10: {'met' if ten['met'] else 'not met'}); "
                f"p99 {p99['p99_ms']} ms "
                f"(target under 50 ms: {'met' if p99['met'] else 'not met'}).",
            ]
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


def witness_cost(w: dict[str, Any]) -> list[str]:
    cost, measured = w["cost"], w["measured"]
    per = cost["per_million_witness_writes"]
    rows = [
        ["S3 PUT (create-only record)", _usd(per["s3_put"]), _usd(per["s3_put"])],
        ["KMS Sign (ECC P-256)", _usd(per["kms_sign"]), "—"],
        [
            "writer Lambda (batches of 10 stream records)",
            _usd(per["writer_lambda"]),
            _usd(per["writer_lambda"]),
        ],
        ["EventBridge Pipes (3 stream records a write)", _usd(per["pipes"]), _usd(per["pipes"])],
        [
            "total per million witness writes",
            _usd(per["per_record_signing_total"]),
            _usd(per["digest_signing_total"]),
        ],
    ]
    return _table(["per million witness writes", "signed one by one (built)", "5-minute digests"], rows) + [
        "",
        f"Measured on moto ({measured['appends']} appends): "
        + ", ".join(f"{k} {v:g}" for k, v in measured["requests_per_append"].items())
        + f" requests per append; a record is {measured['record_bytes']} bytes; the newest checkpoint costs "
        + ", ".join(f"{k} {v}" for k, v in measured["requests_per_newest"].items())
        + f" ({_usd(cost['newest_read_per_million'])} per million reads). Digests add "
        f"{_usd(cost['digest_fixed_per_month'])} a month whatever the volume (one PUT and one Sign per 5 "
        f"minutes); the two cost the same at {cost['break_even_writes_per_month']:,} witness writes a month. "
        f"Change notes for the verifier add at most {_usd(per['change_notes_at_most'])} per million (one PUT "
        f"per chain per 5 minutes); 400 days of storage {_usd(per['storage_for_400_days'])}; the KMS key "
        f"{_usd(cost['kms_key_per_month'])} a month. Prices as of {cost['prices_as_of']} (bench/pricing.py).",
    ]


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
    ("cold_start_packages", "1b. Cold import of the packages as built", cold_start_packages),
    ("store_cost", "2. Store cost per operation and per million", store_cost),
    ("decision_scaling", "3. Decision scaling", decision_scaling),
    ("audit_verify", "4. Audit chain verification", audit_verify),
    ("e2e", "5. Local end-to-end: the hook's decision call", e2e),
    ("packages", "6. Package sizes", packages),
    ("ingestion", "7. Ingestion (bench/bench_ingestion.py)", ingestion),
    ("witness_cost", "8. The AWS witness per million writes", witness_cost),
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
