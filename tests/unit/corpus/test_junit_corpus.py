"""sentinel_domain.junit against the real-world JUnit corpus (shared/corpus/junit, see
shared/corpus/SOURCES.md).

Every expected row below was decided by reading the file itself (counting its <testcase> elements and
their children by hand, and for the 615 KB jest file by counting the markers in it), never by running
the parser. The summary attributes in many of these files lie; the comments say where.

Files are read as bytes and decoded as UTF-8, which is how a client sends them inside a JSON body.
"""

from __future__ import annotations

import time

import pytest

from sentinel_domain.junit import JUnitSummary, MalformedJUnit, parse_junit
from support.paths import CORPUS

JUNIT = CORPUS / "junit"

if not JUNIT.is_dir():
    _reason = f"JUnit corpus not found at {JUNIT}; skipping the corpus tests"
    print(_reason)
    pytest.skip(_reason, allow_module_level=True)

# file: (tests, failures, errors, skipped, outcome)
EXPECTED: dict[str, tuple[int, int, int, int, str]] = {
    # <testsuites/> and nothing else: nothing executed.
    "edge/empty-testsuites-self-closing.xml": (0, 0, 0, 0, "unknown"),
    # 4 cases: one bare, <skipped/>, <failure/>, <error/>.
    "edge/minimal-attributes-no-time-no-suite-name.xml": (3, 1, 1, 1, "fail"),
    # 2 passing cases in 3 levels of suites, plus an <error> directly inside suite "test.3rdlevel"
    # (no testcase). The root claims tests="186" errors="0".
    "edge/nested-testsuites-3-levels-error-without-testcase.xml": (2, 0, 1, 0, "fail"),
    # 7 cases: 1 passing (astral-plane name), 2 skipped, 2 failures, 2 errors.
    "edge/unicode-astral-plane-cjk-names.xml": (5, 2, 2, 2, "fail"),
    # 1 case with <error message="exited with error code 1">; system-out sits in the suite.
    "producers/bazel-generated-test-xml-cdata-in-system-out.xml": (1, 0, 1, 0, "fail"),
    # 3 package suites: 2 pass, 1 failure (TestOne), 2 skipped.
    "producers/go-junit-report-pass-fail-skip.xml": (3, 1, 0, 2, "fail"),
    # 1 passing case, Spring Boot banner in CDATA.
    "producers/gradle-TEST-com.example.demo.DemoApplicationTests.xml": (1, 0, 0, 0, "pass"),
    # 4,239 testcases in 400 suites: 2 with <failure>, 30 with <skipped/>.
    "producers/jest-junit-jest-repo-4239-tests-large.xml": (4209, 2, 0, 30, "fail"),
    # 12 passing cases, each with only <system-out>.
    "producers/junit5-console-TEST-junit-jupiter.xml": (12, 0, 0, 0, "pass"),
    # 1 passing case; two empty suites. The root claims tests="15515" skipped="1".
    "producers/mocha-junit-reporter-root-suite.xml": (1, 0, 0, 0, "pass"),
    # Suite "CLI Arguments": 2 failing .phpt cases beside 3 nested suites with 2 + 4 + 4 passing cases.
    "producers/phpunit-nested-suites-failures.xml": (12, 2, 0, 0, "fail"),
    # 10 cases: 6 pass, pytest.skip + pytest.xfail (both <skipped>), 2 <failure>. Header says tests="15".
    "producers/pytest-xfail-skip-fail-properties.xml": (8, 2, 0, 2, "fail"),
    # 1 case with <failure type="RuntimeError">.
    "producers/rspec_junit_formatter-failure.xml": (1, 1, 0, 0, "fail"),
    # 9 cases: 5 <error>, 2 <failure>, 2 passing; non-ASCII and emoji in messages.
    "producers/surefire-TEST-EmailAddressTest-errors-failures-nonascii.xml": (9, 2, 5, 0, "fail"),
    # 1 case with two <flakyFailure> and no final <failure>: it passed on rerun. Header says
    # tests="3" failures="2".
    "producers/surefire-TEST-io.olamy.FlakyTest-rerun-flakyFailure.xml": (1, 0, 0, 0, "pass"),
    # 2 cases with the same classname and name: one <skipped/>, one <failure>.
    "producers/testng-TEST-pulsar-AddMissingPatchVersionTest-duplicate-names.xml": (1, 1, 0, 1, "fail"),
}

# file: words the refusal message must contain
REFUSED: dict[str, tuple[str, ...]] = {
    # <!DOCTYPE> with an external parameter entity, &oob;, two roots, ISO-8859-1 declaration.
    "hostile/xxe-external-parameter-entity.xml": ("DOCTYPE",),
    # <<<<<<< HEAD on line 2.
    "malformed/git-merge-conflict-markers-TEST-junit-jupiter.xml": ("not well-formed", "line 2"),
    # A complete <testsuite>, then fragments of other runs from line 49.
    "malformed/junk-after-root-element-rspec.xml": ("not well-formed", "junk after document element"),
    # Cut off inside a <skipped> element.
    "malformed/truncated-pytest.xml": ("not well-formed", "no element found"),
}

LARGEST = "producers/jest-junit-jest-repo-4239-tests-large.xml"


def read(relative: str) -> str:
    return (JUNIT / relative).read_bytes().decode("utf-8")


def test_every_corpus_file_has_an_expectation():
    # Given the JUnit corpus on disk
    on_disk = {path.relative_to(JUNIT).as_posix() for path in JUNIT.rglob("*") if path.is_file()}
    # When it is compared with the tables here
    # Then every file has exactly one expectation (a new file must be read and added by hand)
    assert on_disk == set(EXPECTED) | set(REFUSED)
    assert not set(EXPECTED) & set(REFUSED)


def test_everything_under_malformed_and_hostile_is_expected_refused():
    # Given the tables, Then the folders that hold bad files are only in the refused table
    for relative in EXPECTED:
        assert relative.split("/")[0] not in {"malformed", "hostile"}, relative
    for relative in REFUSED:
        assert relative.split("/")[0] in {"malformed", "hostile"}, relative


@pytest.mark.parametrize("relative", sorted(EXPECTED))
def test_corpus_file_counts_and_outcome(relative):
    # Given a real report, decoded from UTF-8 as a client would send it
    text = read(relative)
    tests, failures, errors, skipped, outcome = EXPECTED[relative]
    # When it is parsed
    result = parse_junit(text)
    # Then the counts and the outcome are exactly those read from the file
    assert result == JUnitSummary(
        tests=tests, failures=failures, errors=errors, skipped=skipped, outcome=outcome
    )


@pytest.mark.parametrize("relative", sorted(REFUSED))
def test_corpus_file_is_refused(relative):
    # Given a real report that is not well-formed or is hostile
    text = read(relative)
    # When it is parsed
    with pytest.raises(MalformedJUnit) as caught:
        parse_junit(text)
    # Then it is refused with a message that says why
    message = str(caught.value)
    for word in REFUSED[relative]:
        assert word in message, message


def test_largest_corpus_file_parses_well_under_a_second():
    # Given the largest file of the corpus (615 KB, 4,239 test cases)
    text = read(LARGEST)
    assert len(text) > 500_000
    # When it is parsed (best of three, to keep a busy machine from failing the test)
    timings = []
    for _ in range(3):
        started = time.perf_counter()
        parse_junit(text)
        timings.append(time.perf_counter() - started)
    # Then it takes well under a second
    assert min(timings) < 0.5, timings
