"""Property-based tests of sentinel_domain.junit (hypothesis): whatever a report looks like, however
malformed, it never yields `pass` unless at least one test executed and nothing failed or errored; its counts
equal those of an independent reading of the same text; and reordering suites never changes them.

The oracle below reads the generated text with ElementTree (a tree, where the parser under test streams) and
applies DOMAIN.md rule 8 plus the documented extras of sentinel_domain.junit. Generation is derandomised so a
failure reproduces; each property runs 120 examples in one to two seconds.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape, quoteattr

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sentinel_domain.junit import JUnitSummary, MalformedJUnit, parse_junit

SETTINGS = settings(
    max_examples=120,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# Element names a report may hold: the structure (weighted, so that passing reports are common too), every
# marker (in odd capitals too) and filler.
NAMES = [
    "testsuite",
    "testsuite",
    "testcase",
    "testcase",
    "testcase",
    "system-out",
    "failure",
    "error",
    "skipped",
    "flakyFailure",
    "flakyError",
    "rerunFailure",
    "rerunError",
    "system-out",
    "properties",
    "property",
    "Failure",
    "SKIPPED",
    "x",
]
# Text XML can carry (no controls, surrogates or noncharacters): what is not XML is the mutation tests' job.
TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Cn")), max_size=8)
ATTRIBUTES = {
    "name": TEXT,
    "tests": st.sampled_from(["0", "1", "100", "-1", "x"]),
    "failures": st.sampled_from(["0", "3"]),
    "status": st.sampled_from(["run", "passed", "failed", "FAIL", "error", "notrun", "skipped", "whatever"]),
    "result": st.sampled_from(["completed", "failure", "suppressed", ""]),
}


def element(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.tuples(
        st.sampled_from(NAMES),
        st.dictionaries(st.sampled_from(sorted(ATTRIBUTES)), st.just(""), max_size=2).flatmap(
            lambda keys: st.fixed_dictionaries({k: ATTRIBUTES[k] for k in keys})
        ),
        st.lists(children, max_size=4),
        TEXT,
    )


TREES = st.recursive(
    st.tuples(st.sampled_from(NAMES), st.just({}), st.just([]), TEXT), element, max_leaves=12
)
ROOTS = st.tuples(
    st.sampled_from(["testsuites", "testsuite", "testsuites", "testsuite", "testcase"]),
    st.just({}),
    st.lists(TREES, max_size=5),
    TEXT,
)


def render(node) -> str:
    name, attributes, children, text = node
    attrs = "".join(f" {k}={quoteattr(v)}" for k, v in attributes.items())
    return f"<{name}{attrs}>{escape(text)}{''.join(render(c) for c in children)}</{name}>"


# ---- the oracle -------------------------------------------------------------------------------------------

FAILED_WORDS = {"fail", "failed", "failure"}
ERRORED_WORDS = {"error", "errored"}
NOT_RUN_WORDS = {
    "skip",
    "skipped",
    "notrun",
    "not_run",
    "not-run",
    "disabled",
    "ignored",
    "pending",
    "suppressed",
    "filtered",
}


def oracle(text: str) -> JUnitSummary:
    """Rule 8 on an element tree: each outermost <testcase> once; markers anywhere inside it; a failure or
    error outside every test case counts on its own; counts from cases, never from summary attributes."""
    root = ET.fromstring(text.encode("utf-8"))
    assert root.tag in ("testsuites", "testsuite")
    passed = failed = errored = skipped = suite_failures = suite_errors = 0

    def visit(node: ET.Element, in_case: bool) -> None:
        nonlocal passed, failed, errored, skipped, suite_failures, suite_errors
        for child in node:
            name = child.tag.lower()
            if not in_case and child.tag == "testcase":
                inside = {d.tag.lower() for d in child.iter() if d is not child}
                words = {child.get("status", "").strip().lower(), child.get("result", "").strip().lower()}
                if inside & {"failure", "rerunfailure"} or words & FAILED_WORDS:
                    failed += 1
                elif inside & {"error", "rerunerror"} or words & ERRORED_WORDS:
                    errored += 1
                elif "skipped" in inside or words & NOT_RUN_WORDS:
                    skipped += 1
                else:
                    passed += 1
                continue
            if not in_case and name in ("failure", "rerunfailure"):
                suite_failures += 1
            elif not in_case and name in ("error", "rerunerror"):
                suite_errors += 1
            visit(child, in_case)

    visit(root, False)
    failures, errors, tests = failed + suite_failures, errored + suite_errors, passed + failed + errored
    outcome = "fail" if failures or errors else "unknown" if tests == 0 else "pass"
    return JUnitSummary(tests=tests, failures=failures, errors=errors, skipped=skipped, outcome=outcome)


def holds(summary: JUnitSummary) -> None:
    """The invariant every accepted report keeps."""
    assert summary.outcome in ("pass", "fail", "unknown")
    assert min(summary.tests, summary.failures, summary.errors, summary.skipped) >= 0
    if summary.outcome == "pass":
        assert summary.tests >= 1 and summary.failures == 0 and summary.errors == 0, summary
    if summary.failures or summary.errors:
        assert summary.outcome == "fail", summary
    if summary.tests == 0 and summary.outcome != "fail":
        assert summary.outcome == "unknown", summary


# ---- properties -------------------------------------------------------------------------------------------


@SETTINGS
@given(ROOTS)
def test_a_generated_report_is_counted_as_the_oracle_counts_it(root):
    # Given any report built from JUnit's elements, markers and attributes, in any arrangement
    text = render(root)
    # When it is parsed
    try:
        summary = parse_junit(text)
    except MalformedJUnit:
        # Then it is refused only for its root (the one thing the generator may get wrong on purpose)
        assert root[0] == "testcase"
        return
    # Then it keeps the invariant, and equals the independent reading
    holds(summary)
    assert summary == oracle(text)


MUTATIONS = st.lists(
    st.tuples(
        st.sampled_from(["delete", "insert", "duplicate", "truncate"]),
        st.floats(0, 1),
        st.floats(0, 1),
        st.text(alphabet="<>/&;\"'=!?[]-x \x00\ud800DOCTYPEENTITYfailure", max_size=12),
    ),
    min_size=1,
    max_size=4,
)


def mutate(text: str, mutations) -> str:
    for operation, at, length, chunk in mutations:
        start = int(at * len(text))
        end = min(len(text), start + 1 + int(length * 20))
        if operation == "delete":
            text = text[:start] + text[end:]
        elif operation == "insert":
            text = text[:start] + chunk + text[start:]
        elif operation == "duplicate":
            text = text[:end] + text[start:end] + text[end:]
        else:
            text = text[:start]
    return text


@SETTINGS
@given(ROOTS, MUTATIONS)
def test_a_mangled_report_is_refused_or_counted_never_passed_by_mistake(root, mutations):
    # Given a generated report damaged by deletions, insertions of XML debris, duplications and truncation
    text = mutate(render(root), mutations)
    # When it is parsed
    try:
        summary = parse_junit(text)
    except MalformedJUnit:
        return  # Then either it is refused with MalformedJUnit (and nothing else escapes)...
    # ...or it is still a report, whose counts keep the invariant and equal the independent reading
    holds(summary)
    assert summary == oracle(text)


@SETTINGS
@given(st.text(max_size=200))
def test_arbitrary_text_never_escapes_as_anything_but_a_refusal_or_a_safe_summary(text):
    try:
        summary = parse_junit(text)
    except MalformedJUnit:
        return
    holds(summary)


SUITES = st.lists(
    st.tuples(st.just("testsuite"), st.just({}), st.lists(TREES, max_size=3), TEXT), min_size=2, max_size=4
)


@settings(SETTINGS, max_examples=60)
@given(SUITES, st.randoms(use_true_random=False))
def test_reordering_suites_never_changes_the_counts(suites, rnd):
    # Given several suites under one <testsuites>, and the same suites in another order
    shuffled = list(suites)
    rnd.shuffle(shuffled)
    original = "<testsuites>" + "".join(render(s) for s in suites) + "</testsuites>"
    reordered = "<testsuites>" + "".join(render(s) for s in shuffled) + "</testsuites>"
    # When both are parsed, Then they count the same, or are both refused
    try:
        first = parse_junit(original)
    except MalformedJUnit:
        try:
            parse_junit(reordered)
        except MalformedJUnit:
            return
        raise AssertionError("only one order was refused") from None
    assert parse_junit(reordered) == first


@SETTINGS
@given(
    st.lists(
        st.sampled_from(
            ["<testcase/>", "<testcase><skipped/></testcase>", "<testcase><flakyFailure/></testcase>"]
        ),
        max_size=6,
    )
)
def test_without_a_failure_a_report_passes_exactly_when_a_test_executed(cases):
    # Given cases that passed, were skipped, or passed on rerun, and nothing else
    summary = parse_junit("<testsuite>" + "".join(cases) + "</testsuite>")
    executed = sum(c != "<testcase><skipped/></testcase>" for c in cases)
    # Then the outcome is pass with at least one executed case, else unknown: never pass on zero
    assert summary.tests == executed
    assert summary.outcome == ("pass" if executed else "unknown")
