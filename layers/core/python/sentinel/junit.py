"""Reading a JUnit XML report into counts and an outcome (DOMAIN.md rule 8).

Pure: no I/O, no clock. Imports only the standard library and defusedxml.

The report is read as a stream of start/end events (no element tree is built), so the depth limit is
enforced while reading and a large report costs little memory. Counts come from the ``<testcase>``
elements only; summary attributes such as ``tests=`` or ``failures=`` on a suite are never read.

How a test case is classified (each outermost ``<testcase>`` counts exactly once):

* ``<failure>`` or ``<rerunFailure>`` inside it: failed. ``<error>`` or ``<rerunError>``: errored.
  When it carries both, it counts as failed. Surefire writes ``rerunFailure``/``rerunError`` beside
  the final ``<failure>``/``<error>`` of a test that failed on every rerun; alone they still mean a
  failure.
* ``<flakyFailure>`` / ``<flakyError>`` only: the test failed, then passed on rerun: passed.
* ``<skipped>`` and nothing that failed: skipped (pytest reports ``xfail`` this way). Not executed.
* otherwise: passed.

The markers are looked for anywhere inside the test case, not only as direct children: a report that
hides a ``<failure>`` one level down still fails. A ``<testcase>`` inside another ``<testcase>`` is
folded into the outer one. A ``<failure>``/``<error>`` (or ``rerun*``) that belongs to no test case,
such as one directly inside a ``<testsuite>``, is a suite-level failure/error: it adds to ``failures``
/ ``errors`` (not to ``tests``) and makes the outcome ``fail``.

Element names are compared by local name, so a namespace prefix changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from xml.etree.ElementTree import ParseError
from xml.parsers.expat import ExpatError

from defusedxml import DefusedXmlException, DTDForbidden, EntitiesForbidden, ExternalReferenceForbidden
from defusedxml.ElementTree import DefusedXMLParser

__all__ = ["MAX_DEPTH", "JUnitSummary", "MalformedJUnit", "parse_junit"]

MAX_DEPTH = 256
"""The deepest element nesting accepted; the root element is at depth 1."""

PASS = "pass"
FAIL = "fail"
UNKNOWN = "unknown"

_ROOTS = frozenset({"testsuites", "testsuite"})
_FAILURE_MARKS = frozenset({"failure", "rerunFailure"})
_ERROR_MARKS = frozenset({"error", "rerunError"})

# Bits recorded for the test case being read.
_FAILED = 1
_ERRORED = 2
_SKIPPED = 4


@dataclass(frozen=True)
class JUnitSummary:
    tests: int  # executed test cases = passed + failed + errored (skipped not included)
    failures: int  # failed test cases + suite-level <failure> elements
    errors: int  # errored test cases + suite-level <error> elements
    skipped: int  # skipped test cases (pytest xfail included)
    outcome: str  # "pass" | "fail" | "unknown"


class MalformedJUnit(ValueError):
    """The report must be refused (422 MALFORMED_EVIDENCE). The message says why, for a person."""


def _local(tag: str) -> str:
    # ElementTree's parser reports a namespaced name as "{uri}local".
    return tag.rpartition("}")[2]


class _Counter:
    """A parser target that counts as the elements stream past. It never keeps an element."""

    def __init__(self) -> None:
        self.depth = 0
        self.case_depth = 0  # depth of the open outermost <testcase>, 0 when none is open
        self.case_marks = 0
        self.passed = 0
        self.failed = 0
        self.errored = 0
        self.skipped = 0
        self.suite_failures = 0
        self.suite_errors = 0
        self.seen_root = False

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise MalformedJUnit(
                f"JUnit XML nests elements more than {MAX_DEPTH} levels deep; refusing to read it"
            )
        name = _local(tag)
        if self.depth == 1:
            self.seen_root = True
            if name not in _ROOTS:
                raise MalformedJUnit(
                    f"JUnit XML must have <testsuites> or <testsuite> as its root element, not <{name}>"
                )
            return
        if self.case_depth:
            if name in _FAILURE_MARKS:
                self.case_marks |= _FAILED
            elif name in _ERROR_MARKS:
                self.case_marks |= _ERRORED
            elif name == "skipped":
                self.case_marks |= _SKIPPED
            # flakyFailure / flakyError: failed, then passed on rerun. Nothing to record.
        elif name == "testcase":
            self.case_depth = self.depth
            self.case_marks = 0
        elif name in _FAILURE_MARKS:
            self.suite_failures += 1
        elif name in _ERROR_MARKS:
            self.suite_errors += 1

    def end(self, tag: str) -> None:
        if self.depth == self.case_depth:
            marks = self.case_marks
            if marks & _FAILED:
                self.failed += 1
            elif marks & _ERRORED:
                self.errored += 1
            elif marks & _SKIPPED:
                self.skipped += 1
            else:
                self.passed += 1
            self.case_depth = 0
        self.depth -= 1

    def data(self, text: str) -> None:
        # Present on purpose: without a data handler ElementTree's parser would silently drop an
        # undefined entity reference instead of reporting it.
        pass

    def close(self) -> None:
        return None

    def summary(self) -> JUnitSummary:
        failures = self.failed + self.suite_failures
        errors = self.errored + self.suite_errors
        tests = self.passed + self.failed + self.errored
        if failures or errors:
            outcome = FAIL
        elif tests == 0:
            outcome = UNKNOWN
        else:
            outcome = PASS
        return JUnitSummary(
            tests=tests, failures=failures, errors=errors, skipped=self.skipped, outcome=outcome
        )


def parse_junit(xml_text: str) -> JUnitSummary:
    """Count the test cases of a JUnit XML report and decide its outcome.

    ``xml_text`` is the report as text (already decoded from the JSON body). An XML declaration naming
    another encoding is harmless: the text is handed to the parser as UTF-8 with the encoding forced, so
    the declared one is ignored.

    Raises MalformedJUnit for anything that must be refused: not text, empty, a NUL character, text that
    cannot be encoded (lone surrogates), XML that is not well-formed, any DTD or entity declaration or
    external reference, nesting deeper than MAX_DEPTH, or a root other than testsuites/testsuite.
    """
    if not isinstance(xml_text, str):
        raise MalformedJUnit(f"JUnit XML must be text, not {type(xml_text).__name__}")
    if not xml_text.strip():
        raise MalformedJUnit("JUnit XML is empty")
    if "\x00" in xml_text:
        raise MalformedJUnit("JUnit XML contains a NUL character, which XML does not allow")
    try:
        data = xml_text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MalformedJUnit(
            f"JUnit XML contains a character that is not valid Unicode text at position {exc.start}"
        ) from None

    counter = _Counter()
    parser = DefusedXMLParser(
        target=counter,
        encoding="utf-8",
        forbid_dtd=True,
        forbid_entities=True,
        forbid_external=True,
    )
    try:
        parser.feed(data)
        parser.close()
    except MalformedJUnit:
        raise
    except DTDForbidden:
        raise MalformedJUnit(
            "JUnit XML must not contain a document type declaration (<!DOCTYPE ...>); DTDs are refused"
        ) from None
    except EntitiesForbidden:
        raise MalformedJUnit("JUnit XML must not declare entities (<!ENTITY ...>)") from None
    except ExternalReferenceForbidden:
        raise MalformedJUnit("JUnit XML must not refer to external entities") from None
    except DefusedXmlException as exc:
        raise MalformedJUnit(f"JUnit XML uses a forbidden XML feature: {exc}") from None
    except (ParseError, ExpatError) as exc:
        raise MalformedJUnit(f"JUnit XML is not well-formed: {exc}") from None
    if not counter.seen_root:  # pragma: no cover - expat reports "no element found" first
        raise MalformedJUnit("JUnit XML has no root element")
    return counter.summary()
