"""``benchmarks/run_memory.py`` measures a whole run's process (a stand-in for ``ftctl``,
no cluster)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from tests.benchscripts import load_benchmark

# A stand-in ``ftctl.cli``: holds ``MB`` megabytes for a moment, prints a run's summary.
FAKE_CLI = '''
import json, sys, time
held = bytearray(int(sys.argv[sys.argv.index("--records") + 1]) * 1024 * 1024)
held[::4096] = b"x" * len(held[::4096])  # touched: resident
time.sleep(1.0)
print("a line before the JSON")
print(json.dumps({"passed": True, "records": len(held)}))
'''


def test_the_driver_peak_follows_what_the_run_holds(tmp_path: Path) -> None:
    bench = load_benchmark("run_memory")
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


def test_high_water_mark_of_a_gone_process_is_zero() -> None:
    bench = load_benchmark("run_memory")
    assert bench.high_water_mb(os.getpid()) > 10
    assert bench.high_water_mb(2**22 + 12345) == 0.0
