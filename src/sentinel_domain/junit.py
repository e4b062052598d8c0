"""Reading a JUnit XML report into counts and an outcome (DOMAIN.md rule 8).

Pure: no I/O, no clock. Imports only the standard library.

The report is streamed through the standard library's expat parser with one handler per start and end tag
(no element tree is built, no character data is handed to Python), so the depth limit is enforced while
reading and a large report costs little memory and time. What defusedxml would refuse is refused by handlers
set on the same parser: any document type declaration at its first token (so no entity can be declared,
expanded or fetched), any entity declaration and any external reference; expat itself refuses an undefined
entity reference when there is no DTD. Counts come from the ``<testcase>``
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
from dataclasses import dataclass, field
from xml.parsers import expat

__all__ = [
    "FAILING_NAME_CHARS",
    "FAILING_NAMES",
    "MAX_BYTES",
    "MAX_DEPTH",
    "JUnitSummary",
    "JUnitTooLarge",
    "MalformedJUnit",
    "parse_junit",
]

MAX_DEPTH = 256
"""The deepest element nesting accepted; the root element is at depth 1."""
MAX_BYTES = 2 * 1024 * 1024
"""The largest report read, in UTF-8 bytes: the evidence route's body limit, so only direct callers meet
it."""

FAILING_NAMES = 50
"""How many failing test names a summary keeps (the first, in report order); `failing_count` counts all."""
FAILING_NAME_CHARS = 200
"""The longest failing test name kept, in characters (a longer one is cut and ends with an ellipsis)."""

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

# Bits recorded for the test case being read, and what an element is (_kind).
_FAILED = 1
_ERRORED = 2
_SKIPPED = 4
_MARKS = _FAILED | _ERRORED | _SKIPPED
_CASE = 8


@dataclass(frozen=True)
class JUnitSummary:
    tests: int  # executed test cases = passed + failed + errored (skipped not included)
    failures: int  # failed test cases + suite-level <failure> elements
    errors: int  # errored test cases + suite-level <error> elements
    skipped: int  # skipped test cases (pytest xfail included)
    outcome: str  # "pass" | "fail" | "unknown"
    # The first FAILING_NAMES failed or errored test cases, as `classname.name` (caller text: escape it
    # before showing it anywhere), and how many test cases failed or errored in all.
    # Not part of a summary's equality: what is counted is compared, the names are only shown.
    failing: tuple[str, ...] = field(default=(), compare=False)
    failing_count: int = field(default=0, compare=False)


class MalformedJUnit(ValueError):
    """The report must be refused (422 MALFORMED_EVIDENCE). The message says why, for a person."""


class JUnitTooLarge(MalformedJUnit):
    """The report is larger than MAX_BYTES (413 PAYLOAD_TOO_LARGE)."""


def _kind(tag: str) -> int:
    """What an element is, by its local name: a test case, a failure, error or skip marker, or nothing."""
    name = tag.rpartition("}")[2]  # with a namespace, expat reports "uri}local"
    if name == "testcase":
        return _CASE
    lowered = name.lower()
    if lowered in _FAILURE_MARKS:
        return _FAILED
    if lowered in _ERROR_MARKS:
        return _ERRORED
    if lowered == "skipped":
        return _SKIPPED
    return 0


def _case_marks(attributes: list[str]) -> int:
    """A case's own status or result attribute can only make it worse. `attributes` is expat's ordered
    form: name, value, name, value..."""
    marks = 0
    named = dict(zip(attributes[::2], attributes[1::2], strict=True))
    for attribute in ("status", "result"):
        word = named.get(attribute, "").strip().lower()
        if word in _FAILED_WORDS:
            marks |= _FAILED
        elif word in _ERRORED_WORDS:
            marks |= _ERRORED
        elif word in _NOT_RUN_WORDS:
            marks |= _SKIPPED
    return marks


def _case_name(attributes: list[str]) -> str:
    """`classname.name` of a test case (either alone when the other is missing), bounded."""
    named = dict(zip(attributes[::2], attributes[1::2], strict=True))
    parts = [named.get("classname", "").strip(), named.get("name", "").strip()]
    name = ".".join(p for p in parts if p) or "(unnamed test case)"
    return name if len(name) <= FAILING_NAME_CHARS else name[: FAILING_NAME_CHARS - 1] + "\u2026"


def _note_failing(failing: list[str], attributes: list[str]) -> None:
    if len(failing) < FAILING_NAMES:
        failing.append(_case_name(attributes))


def _check_root(tag: str) -> None:
    name = tag.rpartition("}")[2]
    if name not in _ROOTS:
        raise MalformedJUnit(
            f"JUnit XML must have <testsuites> or <testsuite> as its root element, not <{name}>"
        )


def _refuse_dtd(*_args: object) -> None:
    raise MalformedJUnit(
        "JUnit XML must not contain a document type declaration (<!DOCTYPE ...>); DTDs are refused"
    )


def _refuse_entities(*_args: object) -> None:
    raise MalformedJUnit("JUnit XML must not declare entities (<!ENTITY ...>)")


def _refuse_external(*_args: object) -> int:  # expat's handler returns an int; this one never returns
    raise MalformedJUnit("JUnit XML must not refer to external entities")


def _count(data: bytes, case_words: bool) -> tuple[JUnitSummary, bool]:
    """Stream the report through expat, counting as the elements go past; no element is kept.

    The handlers are closures over local counters: one Python call per start tag and one per end tag is
    all the work a report costs beyond expat itself (no character data handler: expat refuses an undefined
    entity on its own when there is no DTD, and any DTD is refused at its first token)."""
    depth = case_depth = case_marks = 0
    cases = failed = errored = skipped = suite_failures = suite_errors = 0
    kinds: dict[str, int] = {}
    case_attributes: list[str] = []
    failing: list[str] = []

    def start(tag: str, attributes: list[str]) -> None:
        nonlocal depth, case_depth, case_marks, cases, suite_failures, suite_errors, case_attributes
        depth += 1
        if depth > MAX_DEPTH:
            raise MalformedJUnit(
                f"JUnit XML nests elements more than {MAX_DEPTH} levels deep; refusing to read it"
            )
        try:
            kind = kinds[tag]
        except KeyError:
            kind = kinds[tag] = _kind(tag)
            if depth == 1:  # the first element is the root, and its name the first seen
                _check_root(tag)
        if case_depth:
            case_marks |= kind & _MARKS  # a <testcase> inside a case is folded into it
        elif kind == _CASE:
            cases += 1
            case_depth = depth
            case_attributes = attributes  # a reference only: read when the case turns out to have failed
            # A scan in C rules out a case without either attribute (a value spelled "status" only sends it
            # the long way round); on the first reading no case is looked at (see parse_junit).
            case_marks = (
                _case_marks(attributes)
                if case_words and ("status" in attributes or "result" in attributes)
                else 0
            )
        elif kind == _FAILED:
            suite_failures += 1
        elif kind == _ERRORED:
            suite_errors += 1

    def end(_tag: str) -> None:
        nonlocal depth, case_depth, failed, errored, skipped
        if depth == case_depth:
            if case_marks:
                if case_marks & _FAILED:
                    failed += 1
                    _note_failing(failing, case_attributes)
                elif case_marks & _ERRORED:
                    errored += 1
                    _note_failing(failing, case_attributes)
                else:
                    skipped += 1
            case_depth = 0
        depth -= 1

    parser = expat.ParserCreate("utf-8", "}")  # the declared encoding is overridden: the text is UTF-8
    parser.ordered_attributes = True  # a list per tag is cheaper to build than a dict
    parser.StartDoctypeDeclHandler = _refuse_dtd
    parser.EntityDeclHandler = _refuse_entities
    parser.UnparsedEntityDeclHandler = _refuse_entities
    parser.ExternalEntityRefHandler = _refuse_external
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise MalformedJUnit(f"JUnit XML is not well-formed: {exc}") from None
    # expat interns every element and attribute name it met: a report that never names `status` or
    # `result` has no case whose own status could make it worse.
    named = "status" in parser.intern or "result" in parser.intern
    failures = failed + suite_failures
    errors = errored + suite_errors
    tests = cases - skipped
    outcome = FAIL if failures or errors else UNKNOWN if tests == 0 else PASS
    summary = JUnitSummary(
        tests=tests,
        failures=failures,
        errors=errors,
        skipped=skipped,
        outcome=outcome,
        failing=tuple(failing),
        failing_count=failed + errored,
    )
    return summary, named


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
    if not xml_text or xml_text.isspace():
        raise MalformedJUnit("JUnit XML is empty")
    try:
        data = xml_text.encode("utf-8")
    except UnicodeEncodeError as exc:
        if "\x00" in xml_text:
            raise MalformedJUnit("JUnit XML contains a NUL character, which XML does not allow") from None
        raise MalformedJUnit(
            f"JUnit XML contains a character that is not valid Unicode text at position {exc.start}"
        ) from None
    if b"\x00" in data:  # searched in the bytes: a byte search is the fast one
        raise MalformedJUnit("JUnit XML contains a NUL character, which XML does not allow")
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

    # Most reports name neither `status` nor `result`: read without looking at any case's attributes, and
    # read again, looking, only when expat met either name.
    summary, named = _count(data, case_words=False)
    return _count(data, case_words=True)[0] if named else summary
