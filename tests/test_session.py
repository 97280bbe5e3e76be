"""Starting the Spark session: nothing may outlive a start that fails or is interrupted."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from pyspark.sql import SparkSession

from ftctl.cluster.errors import InfraError
from ftctl.spark.session import DRIVER_CLASS, start_session


def _fake_start(raised: BaseException, started: list[subprocess.Popen[bytes]]) -> Any:
    def get_or_create(self: Any) -> Any:
        # What pyspark does first: launch the driver JVM; then the start fails.
        started.append(subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(120)", DRIVER_CLASS]))
        raise raised

    return get_or_create


@pytest.mark.parametrize("raised", [KeyboardInterrupt(), RuntimeError("Java gateway exited")])
def test_a_failed_session_start_kills_the_driver_it_launched(
        raised: BaseException, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[subprocess.Popen[bytes]] = []
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", _fake_start(raised, started))
    try:
        expected = type(raised) if isinstance(raised, KeyboardInterrupt) else InfraError
        with pytest.raises(expected):
            start_session("spark://127.0.0.1:1", "ftctl-test", slots=1)
        (driver,) = started
        assert driver.wait(10) is not None  # gone, not left running
        assert bystander.poll() is None  # other children are not ours to kill
    finally:
        for p in (*started, bystander):
            p.kill()
            p.wait()


def test_a_driver_caught_inside_exec_is_killed_all_the_same(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Just after fork, and while the launcher script execs the JVM, a process reads as
    # having no arguments; the first look must not decide it is not ours.
    import psutil

    started: list[subprocess.Popen[bytes]] = []
    real_cmdline = psutil.Process.cmdline
    looked: set[int] = set()

    def empty_at_first(self: psutil.Process) -> list[str]:
        if self.pid not in looked:
            looked.add(self.pid)
            return []
        return real_cmdline(self)

    monkeypatch.setattr(psutil.Process, "cmdline", empty_at_first)
    monkeypatch.setattr(SparkSession.Builder, "getOrCreate",
                        _fake_start(RuntimeError("Java gateway exited"), started))
    try:
        with pytest.raises(InfraError):
            start_session("spark://127.0.0.1:1", "ftctl-test", slots=1)
        (driver,) = started
        assert driver.wait(10) is not None
    finally:
        for p in started:
            p.kill()
            p.wait()


def test_the_driver_heap_pinned_is_the_driver_memory_whatever_set_it() -> None:
    from ftctl.spark.session import heap_pinned, spark_conf

    conf = heap_pinned(spark_conf("local[1]", "t"))
    assert conf["spark.driver.extraJavaOptions"] == "-Xms512m -XX:+AlwaysPreTouch"
    bigger = heap_pinned({**spark_conf("local[1]", "t"), "spark.driver.memory": "2g"})
    assert bigger["spark.driver.extraJavaOptions"].startswith("-Xms2g ")
    # JVM options given by the caller are theirs: not rewritten.
    own = {**spark_conf("local[1]", "t"), "spark.driver.extraJavaOptions": "-Xss4m"}
    assert heap_pinned(own)["spark.driver.extraJavaOptions"] == "-Xss4m"
