"""``benchmarks/verify_memory.py`` judges the anomalies it plants (small sizes, no cluster)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.benchscripts import load_benchmark

ROOT = Path(__file__).resolve().parent.parent


def _bench() -> Any:
    return load_benchmark("verify_memory")


@pytest.mark.parametrize("shape", ["wordcount", "sharder"])
def test_the_verdict_counts_what_the_output_lost_and_repeated(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str) -> None:
    bench = _bench()
    monkeypatch.setattr(bench, "LOSE", 7)
    monkeypatch.setattr(bench, "REPEAT", 11)
    n = 600
    bench.build(shape, n, tmp_path)
    res = bench.judge(tmp_path)
    # A record both dropped and repeated is written once: no anomaly.
    lose = {s for s in range(n) if s % 7 == 3}
    repeat = {s for s in range(n) if s % 11 == 3}
    assert res["anomalies"] == {"lost": len(lose - repeat), "duplicated": len(repeat - lose)}
    assert res["divergences"] == 5 and res["verify_peak_mb"] > 0


def test_the_temp_space_peak_is_what_the_verdict_wrote_in_its_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ftctl.verify import outofcore

    bench = _bench()
    monkeypatch.setattr(bench, "TEMP_EVERY", 0.001)
    samplers: list[Any] = []

    class Kept(bench.TempSpace):  # type: ignore[name-defined]
        def __enter__(self) -> Any:
            samplers.append(self)
            return super().__enter__()

    real_close = outofcore.close

    def close_once_sampled(con: Any) -> None:
        # A short verdict on a loaded machine may end between two samples: its files
        # stay until a whole sample has been taken after this point.
        taken, deadline = samplers[-1].samples, time.monotonic() + 30
        while samplers[-1].samples < taken + 2 and time.monotonic() < deadline:
            time.sleep(0.001)
        real_close(con)

    monkeypatch.setattr(bench, "TempSpace", Kept)
    monkeypatch.setattr(outofcore, "close", close_once_sampled)
    bench.build("wordcount", 3000, tmp_path)
    res = bench.judge(tmp_path)
    # The ranks' files of 3,000 records a side, at least: a few KB, under a MB; and the
    # verdict removed its folder when it ended.
    assert len(samplers) == 1
    assert 1_000 < res["temp_peak_gb"] * 1e9 < 10**6
    assert not any((tmp_path / "duckdb").iterdir())
    # The sampler itself: a file written in the folder while it runs is seen.
    (tmp_path / "t").mkdir()
    (tmp_path / "a").write_bytes(b"x" * 12_345)
    with Kept(tmp_path / "t") as temp:
        (tmp_path / "a").rename(tmp_path / "t" / "a")  # whole at once: not seen half written
        deadline = time.monotonic() + 30
        while temp.peak == 0 and time.monotonic() < deadline:
            time.sleep(0.001)
    assert temp.peak == 12_345


def test_the_in_memory_comparison_gives_the_same_verdict(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bench = _bench()
    monkeypatch.setattr(bench, "LOSE", 5)
    monkeypatch.setattr(bench, "REPEAT", 13)
    bench.build("wordcount", 400, tmp_path)
    ooc, mem = bench.judge(tmp_path), bench.judge_in_memory(tmp_path)
    assert ooc["anomalies"] and ooc["anomalies"] == mem["anomalies"]
    assert ooc["divergences"] == mem["divergences"]


def test_kept_files_are_judged_as_they_are(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # ``--files``: a run's two sink files, judged without building any.
    import subprocess
    import sys

    bench = _bench()
    monkeypatch.setattr(bench, "LOSE", 7)
    monkeypatch.setattr(bench, "REPEAT", 1000)
    bench.build("sharder", 100, tmp_path)
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "verify_memory.py"),
                          "--files", str(tmp_path)], capture_output=True, text=True,
                         check=True).stdout
    assert "verify " in out and "{'lost': 14}" in out, out
