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

The case's own ``status`` or ``result`` attribute (Bazel, CTest and xunit-style writers put it there) can
only make it worse, never better: a failing word (``fail``, ``failed``, ``failure``) fails it, an erroring
one (``error``, ``errored``) errors it, a not-run word (``skipped``, ``notrun``, ``disabled``...) skips it
unless a marker says it failed. ``status="run"``, ``result="completed"`` or ``status="passed"`` change
nothing. Marker names are compared without case: a ``<Failure>`` still fails.

An XML declaration may name UTF-8, US-ASCII or an ASCII-compatible single-byte charset (ISO-8859-n,
windows-125n): the text is parsed as UTF-8 whatever it says, and in those the markup reads the same. Any other
declared encoding is refused (see _SAME_MARKUP_ENCODINGS).

The markers are looked for anywhere inside the test case, not only as direct children: a report that
hides a ``<failure>`` one level down still fails. A ``<testcase>`` inside another ``<testcase>`` is
folded into the outer one. A ``<failure>``/``<error>`` (or ``rerun*``) that belongs to no test case,
such as one directly inside a ``<testsuite>``, is a suite-level failure/error: it adds to ``failures``
/ ``errors`` (not to ``tests``) and makes the outcome ``fail``.

Element names are compared by local name, so a namespace prefix changes nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from xml.etree.ElementTree import ParseError
from xml.parsers.expat import ExpatError

from defusedxml import DefusedXmlException, DTDForbidden, EntitiesForbidden, ExternalReferenceForbidden
from defusedxml.ElementTree import DefusedXMLParser

__all__ = ["MAX_BYTES", "MAX_DEPTH", "JUnitSummary", "JUnitTooLarge", "MalformedJUnit", "parse_junit"]

MAX_DEPTH = 256
"""The deepest element nesting accepted; the root element is at depth 1."""
MAX_BYTES = 2 * 1024 * 1024
"""The largest report read, in UTF-8 bytes: the evidence route's body limit, so only direct callers meet
it."""

PASS = "pass"
FAIL = "fail"
UNKNOWN = "unknown"

_ROOTS = frozenset({"testsuites", "testsuite"})
_FAILURE_MARKS = frozenset({"failure", "rerunfailure"})  # compared lower-cased
_ERROR_MARKS = frozenset({"error", "rerunerror"})
# The report arrives as text and is read (and hashed) as UTF-8, so its declaration must name an encoding in
# which that same markup reads the same: UTF-8 or an ASCII-compatible single-byte charset. A declaration of
# UTF-16, UTF-7, EBCDIC or an unknown charset would make a reader that honours it see other elements than we
# count (a report could pass here and fail there), so it is refused rather than ignored.
_SAME_MARKUP_ENCODINGS = frozenset(
    {"utf8", "usascii", "ascii", "latin1", "l1"}
    | {f"iso8859{n}" for n in range(1, 17)}
    | {f"windows{n}" for n in range(1250, 1259)}
    | {f"cp{n}" for n in range(1250, 1259)}
)
_DECLARED_ENCODING = re.compile(r"""\ufeff?<\?xml[^>]*?\sencoding\s*=\s*["']([^"']*)["']""")
_FAILED_WORDS = frozenset({"fail", "failed", "failure"})
_ERRORED_WORDS = frozenset({"error", "errored"})
_NOT_RUN_WORDS = frozenset(
    {
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
)

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


class JUnitTooLarge(MalformedJUnit):
    """The report is larger than MAX_BYTES (413 PAYLOAD_TOO_LARGE)."""


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
        lowered = name.lower()
        if self.case_depth:
            if lowered in _FAILURE_MARKS:
                self.case_marks |= _FAILED
            elif lowered in _ERROR_MARKS:
                self.case_marks |= _ERRORED
            elif lowered == "skipped":
                self.case_marks |= _SKIPPED
            # flakyFailure / flakyError: failed, then passed on rerun. Nothing to record.
        elif name == "testcase":
            self.case_depth = self.depth
            self.case_marks = 0
            for attribute in ("status", "result"):
                word = attrib.get(attribute, "").strip().lower()
                if word in _FAILED_WORDS:
                    self.case_marks |= _FAILED
                elif word in _ERRORED_WORDS:
                    self.case_marks |= _ERRORED
                elif word in _NOT_RUN_WORDS:
                    self.case_marks |= _SKIPPED
        elif lowered in _FAILURE_MARKS:
            self.suite_failures += 1
        elif lowered in _ERROR_MARKS:
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

    ``xml_text`` is the report as text (already decoded from the JSON body). It is handed to the parser as
    UTF-8 with the encoding forced; a declaration may only name an encoding in which the markup would read
    the same (UTF-8, ASCII, ISO-8859-n, windows-125n).

    Raises MalformedJUnit for anything that must be refused: not text, empty, a NUL character, text that
    cannot be encoded (lone surrogates), a declared encoding whose markup would read differently, XML that is
    not well-formed, any DTD or entity declaration or external reference, nesting deeper than MAX_DEPTH, or a
    root other than testsuites/testsuite; and its subclass JUnitTooLarge for more than MAX_BYTES.
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
    if len(data) > MAX_BYTES:
        raise JUnitTooLarge(f"JUnit XML is {len(data)} bytes; at most {MAX_BYTES} are read")
    declared = _DECLARED_ENCODING.match(xml_text[:512])
    if declared:
        name = re.sub(r"[-_\s]", "", declared.group(1)).lower()
        if name not in _SAME_MARKUP_ENCODINGS:
            raise MalformedJUnit(
                f"JUnit XML declares the encoding {declared.group(1)[:40]!r}, but arrived as text and is "
                "read as UTF-8: a reader honouring the declaration would see other markup. Declare UTF-8 or "
                "nothing"
            )

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
