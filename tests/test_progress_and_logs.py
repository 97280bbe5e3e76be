"""Progress lines in a pipe stay sparse; the driver JVM's output lands in a file, not stderr."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from ftctl.progress import LiveLine, skeleton
from ftctl.spark.session import _pump, collect_executor_logs


def _pipe_console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=False, width=80), buf


def test_a_pipe_gets_one_line_per_new_message_not_per_poll() -> None:
    con, buf = _pipe_console()
    with LiveLine(con, quiet_s=3600) as live:
        live.update("starting 2 worker(s)")
        for _ in range(50):
            live.update("0/2 worker(s) ALIVE")
        live.update("1/2 worker(s) ALIVE")  # same words, new numbers: not worth a line yet
        live.note("cluster up in 5.0 s")
    assert buf.getvalue().splitlines() == [
        "starting 2 worker(s)", "0/2 worker(s) ALIVE", "cluster up in 5.0 s"]


def test_a_pipe_repeats_a_changing_count_after_the_quiet_interval() -> None:
    con, buf = _pipe_console()
    with LiveLine(con, quiet_s=0.0) as live:
        live.update("none: 1 s, 10 records read")
        live.update("none: 2 s, 20 records read")
    assert len(buf.getvalue().splitlines()) == 2


def test_quiet_prints_nothing() -> None:
    con, buf = _pipe_console()
    with LiveLine(con, quiet=True) as live:
        live.update("x")
        live.note("y")
    assert buf.getvalue() == ""


def test_skeleton_blanks_numbers_only() -> None:
    assert skeleton("1/2 worker(s) ALIVE, 1,234 records") == "#/# worker(s) ALIVE, # records"


def test_driver_output_is_pumped_to_the_log_and_not_the_terminal(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; print('WARN NativeCodeLoader'); "
         "print('ERROR TaskSchedulerImpl', file=sys.stderr)"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    _pump(proc.stdout, tmp_path / "driver.log", verbose=False)
    proc.wait()
    assert (tmp_path / "driver.log").read_text().splitlines() == [
        "WARN NativeCodeLoader", "ERROR TaskSchedulerImpl"]
    out, err = capfd.readouterr()
    assert "NativeCodeLoader" not in out + err


def test_verbose_streams_the_driver_output_too(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "print('WARN Utils')"],
                            stdout=subprocess.PIPE)
    assert proc.stdout is not None
    _pump(proc.stdout, tmp_path / "driver.log", verbose=True)
    proc.wait()
    assert "[spark] WARN Utils" in capsys.readouterr().err


def test_executor_logs_of_one_application_are_copied(tmp_path: Path) -> None:
    work = tmp_path / "work"
    for worker, app, executor in (("w0", "app-1", "0"), ("w1", "app-1", "3"),
                                  ("w1", "app-2", "0")):
        d = work / worker / app / executor
        d.mkdir(parents=True)
        (d / "stderr").write_text(f"{app} {executor}")
    got = collect_executor_logs(work, "app-1", tmp_path / "logs")
    assert sorted(p.name for p in got) == ["executor-w0-0.stderr", "executor-w1-3.stderr"]
    assert (tmp_path / "logs" / "executor-w1-3.stderr").read_text() == "app-1 3"
