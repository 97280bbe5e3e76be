"""``benchmarks/run_memory.py`` measures a whole run's process (a stand-in for ``ftctl``,
no cluster)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pytest

from tests.benchscripts import load_benchmark

# A stand-in ``ftctl.cli``: holds ``MB`` megabytes for a moment, prints a run's summary.
FAKE_CLI = '''
import json, sys, time
held = bytearray(int(sys.argv[sys.argv.index("--records") + 1]) * 1024 * 1024)
held[::4096] = b"x" * len(held[::4096])  # touched: resident
with open("spilled", "wb") as f:  # the run's folder: its files count as its disk space
    f.write(b"y" * 1000 * len(sys.argv[sys.argv.index("--records") + 1]))
time.sleep(1.0)
print("a line before the JSON")
print(json.dumps({"passed": True, "records": len(held)}))
'''


def test_the_driver_peak_follows_what_the_run_holds(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    bench = load_benchmark("run_memory")
    monkeypatch.setattr(sys.modules["verify_memory"], "TEMP_EVERY", 0.01)
    pkg = tmp_path / "fake" / "ftctl"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "cli.py").write_text(FAKE_CLI)
    args = argparse.Namespace(protocol="none", pythonpath=str(tmp_path / "fake"), every=0.05)
    small = bench.run_once("wordcount", 20, args)
    big = bench.run_once("wordcount", 220, args)
    assert small["exit"] == 0 and small["passed"] is True
    assert big["driver_hwm_mb"] - small["driver_hwm_mb"] > 150  # 200 MB more held
    assert small["wall_s"] >= 1.0 and len(big["load"]) == 2
    # the file it wrote in its folder, 1,000 bytes a digit of --records (and the run's
    # stdout, a few bytes)
    assert 2000 <= small["disk_bytes"] < 2500 and 3000 <= big["disk_bytes"] < 3500


def test_high_water_mark_of_a_gone_process_is_zero() -> None:
    bench = load_benchmark("run_memory")
    assert bench.high_water_mb(os.getpid()) > 10
    assert bench.high_water_mb(2**22 + 12345) == 0.0
