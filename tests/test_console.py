"""Off a terminal the shared consoles print each line whole: in a pipe or a CI log rich
would otherwise break a sentence at 80 columns ("total 53.8 " / "s (cluster ...)")."""

from __future__ import annotations

import io

import ftctl.console
from ftctl.console import make_console


def test_a_long_line_in_a_pipe_is_one_line() -> None:
    buf = io.StringIO()
    con = make_console(file=buf, width=60)
    fact = ("400,000 records in 53.80 s (7,435 records/s); detections 1, restarts 2; "
            "total 53.8 s (cluster 9.7 s, session 18.9 s)")
    con.print(fact, highlight=False)
    con.print("run 20261123-201535-wordcount-none-32b8 -> results/20261123-201535-wordcount-"
              "none-32b8", highlight=False)
    assert buf.getvalue().splitlines() == [
        fact, "run 20261123-201535-wordcount-none-32b8 -> "
              "results/20261123-201535-wordcount-none-32b8"]


def test_a_terminal_still_wraps_at_spaces() -> None:
    buf = io.StringIO()
    con = make_console(file=buf, width=40, force_terminal=True)
    con.print("total 53.8 s (cluster 9.7 s, session 18.9 s) and more words", highlight=False)
    assert len(buf.getvalue().splitlines()) == 2


def test_the_shared_consoles_soft_wrap_off_a_terminal() -> None:
    for con in (ftctl.console.console, ftctl.console.err_console):
        assert con.soft_wrap is (not con.is_terminal)
