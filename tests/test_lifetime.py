"""A child ftctl started by another (the gate's chaos runs) dies with its parent, however
the parent died: nothing a command started outlives it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psutil
import pytest

from ftctl.cluster.process import wait_until
from ftctl.lifetime import PARENT_ENV

ROOT = Path(__file__).resolve().parent.parent
# A parent that starts a long ftctl command and waits for it, tied or not.
PARENT = textwrap.dedent("""
    import os, subprocess, sys
    from ftctl.lifetime import tied_environment
    env = tied_environment() if sys.argv[1] == "tied" else dict(os.environ)
    subprocess.run([sys.executable, "-m", "ftctl.cli", "sim", "topologies/diamond.yaml",
                    "-p", "none", "-n", "100000000"], env=env)
""")


def _child_of(parent: psutil.Popen) -> psutil.Process:
    found: list[psutil.Process] = []

    def started() -> bool:
        found[:] = [p for p in parent.children() if "ftctl.cli" in " ".join(p.cmdline())]
        return bool(found)

    assert wait_until(started, timeout=30), "the parent never started its child"
    return found[0]


def _ends(proc: psutil.Process, timeout: float) -> bool:
    return wait_until(lambda: not proc.is_running() or
                      proc.status() == psutil.STATUS_ZOMBIE, timeout=timeout)


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_a_tied_child_dies_with_its_killed_parent_and_an_untied_one_would_not() -> None:
    for mode in ("tied", "untied"):
        parent = psutil.Popen([sys.executable, "-c", PARENT, mode], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        child = _child_of(parent)
        try:
            parent.send_signal(signal.SIGKILL)
            parent.wait(10)
            # the untied one is given a few seconds only: it would run for minutes
            assert _ends(child, 10 if mode == "tied" else 3) == (mode == "tied"), mode
        finally:
            if child.is_running():
                child.kill()
                child.wait(10)


def test_the_gate_ties_its_chaos_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from ftctl.gate import runner
    from ftctl.gate.suite import GateCase

    seen: list[dict[str, str]] = []

    def fake_run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        seen.append(kwargs["env"])
        return subprocess.CompletedProcess(cmd, 0, json.dumps({"passed": True}), "")

    monkeypatch.setattr(runner.subprocess, "run", fake_run)
    case = GateCase(name="spark-kill", host="spark", topology=Path("topologies/wordcount.yaml"),
                    protocol="checkpoint", kill=1)
    assert runner.run_spark_case(case, repeat=2).guarantee_held
    assert [env[PARENT_ENV] for env in seen] == [str(os.getpid())] * 2
    assert PARENT_ENV not in os.environ  # this process is not tied to anything
