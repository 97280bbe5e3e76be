"""A run with no delivery promise (``none`` where an operator keeps state) reads as such
in the report: counted, not judged; never "none held"."""

from __future__ import annotations

from ftctl.report.views import verdict_words


def test_the_report_says_there_was_nothing_to_check() -> None:
    sinks = [{"lost": 1_234, "duplicated": 56}]
    assert verdict_words({"guarantee": "none", "passed": True, "sinks": sinks},
                         complete=True) == "no guarantee to check; 1,234 lost, 56 duplicated"
    assert verdict_words({"guarantee": "none", "passed": True, "sinks": []},
                         complete=True) == "no guarantee to check; no record lost or duplicated"
    assert verdict_words({"guarantee": "at-most-once", "passed": False, "sinks": sinks},
                         complete=True).startswith("at-most-once broken: 1,234 records lost")
