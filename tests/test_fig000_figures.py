"""``ftctl figure 000-fig2`` / ``000-fig3`` without Spark: each run is replaced by the
figures a real run would keep, and the table, ratios and plot must carry them through."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from ftctl.cli import app
from ftctl.compare.figures import RunFigures
from ftctl.figures import FigureOptions, fig_000_fig2, fig_000_fig3
from ftctl.kernel.history import HistoryEvent
from ftctl.run.execute import RunRequest
from ftctl.spark.host import HostResult
from ftctl.store import DirectoryStore, Sealed

MASTER = {"master": "spark://fake:7077"}  # no cluster is started for a given master

# fig2, per (protocol, N): restarts, detection, first output, recovery (incl. detection),
# snapshot bytes read (None: not sized), records processed, replayed.
FIG2 = {
    ("causal", 20_000): (1, 0.05, 0.12, 0.25, 21_695, 432_000, 0),
    ("lineage", 20_000): (22, 0.05, 6.0, 8.05, 0, 563_376, 0),
    ("causal", 100_000): (1, 0.06, 0.15, 0.46, 21_695, 672_000, 0),
    ("lineage", 100_000): (22, 0.06, 12.06, None, None, 1_043_198, 0),
}


def fig2_runner(seen: list[RunRequest]) -> Any:
    def run(request: RunRequest, ext: Any) -> int:
        seen.append(request)
        proto, n = request.config["run"].split(" N=")
        restarts, det, first, rec, snap, processed, replayed = FIG2[(proto, int(n))]
        ext.figures = RunFigures(
            run_id=f"{proto}-{n}", protocol=proto, passed=True, lost=0, duplicated=0,
            detection_s=det, restart_s=None, recovery_s=rec, throughput_rps=None,
            latency_p50_s=None, records_processed=processed, snapshot_bytes=0,
            restarts=restarts, seconds=30.0, replayed=replayed)
        ext.recovery = {"detection_s": det, "first_output_s": first, "recovery_s": rec}
        ext.snapshot_read = snap
        return 0
    return run


def test_fig2_table_and_ratios_carry_each_runs_numbers(tmp_path: Path) -> None:
    seen: list[RunRequest] = []
    res = fig_000_fig2.run(FigureOptions(tmp_path, host="spark", quick=True, options=MASTER),
                           fig2_runner(seen))
    assert [r.config["run"] for r in seen] == ["causal N=20000", "lineage N=20000",
                                               "causal N=100000", "lineage N=100000"]
    assert all(r.master == "spark://fake:7077" and r.spares == 1 for r in seen)
    # N votes at 16,000/s, then 4,000/s for the 6 s settle and the 25 s tail
    inp = seen[2].topology.input
    assert (inp.records, inp.rate) == (100_000 + 4_000 * 31, 16_000.0)
    assert inp.rate_change is not None and (inp.rate_change.at, inp.rate_change.rate) == \
        (100_000, 4_000.0)
    assert "at: 12.25" in (tmp_path / "kill-sharder-100000.yaml").read_text()
    rows = [r[:9] for r in res.rows]  # all but the load average
    # re-processed: beyond 3 per vote, the run's votes being N + 4,000/s x 31 s
    assert rows == [
        ("20,000", "causal", "yes", 1, "0.05", "0.12", "0.20", "21,695", "0"),
        ("20,000", "lineage", "yes", 22, "0.05", "6.00", "8.00", "0", "131,376"),
        ("100,000", "causal", "yes", 1, "0.06", "0.15", "0.40", "21,695", "0"),
        ("100,000", "lineage", "yes", 22, "0.06", "12.06", "-", "-", "371,198"),
    ]
    # first output 6/0.12 = 50x, recovery 8/0.2 = 40x; at 100k lineage never settled:
    # its recovery is at least its first output after detection, (12.06-0.06)/0.4
    assert res.summary["ratios"] == {
        "20000": {"first_output": 50.0, "recovery": 40.0},
        "100000": {"first_output": 80.4, "recovery_at_least": 30.0}}
    assert "N=20,000: lineage / causal first output 50x, recovery 40x" in res.notes
    assert any(n.startswith("N=100,000: lineage / causal first output 80.4x, recovery >= "
                            "30x") for n in res.notes)
    png = tmp_path / "fig2.png"
    assert png in res.files and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fig2_run_budget_covers_the_input_at_any_size(tmp_path: Path) -> None:
    """At 50M votes the input alone lasts 69 min: the run may not time out before it ends."""
    seen: list[RunRequest] = []
    FIG2[("causal", 50_000_000)] = FIG2[("causal", 100_000)]
    try:
        fig_000_fig2.run(FigureOptions(tmp_path, host="spark", options={
            **MASTER, "sizes": "50000000", "protocols": "causal", "tail": "250"}),
            fig2_runner(seen))
    finally:
        del FIG2[("causal", 50_000_000)]
    (req,) = seen
    input_s = 50_000_000 / 12_000 + 6 + 250
    assert input_s < req.timeout <= input_s + 1_000


def test_fig2_says_how_long_its_input_lasts_before_the_first_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[RunRequest] = []
    printed_first: list[str] = []
    runner = fig2_runner(seen)

    def first(request: RunRequest, ext: Any) -> int:
        printed_first.append(capsys.readouterr().out)
        return int(runner(request, ext))

    FIG2[("causal", 50_000_000)] = FIG2[("causal", 100_000)]
    try:
        fig_000_fig2.run(FigureOptions(tmp_path, host="spark", options={
            **MASTER, "sizes": "50000000", "protocols": "causal", "tail": "250"}), first)
    finally:
        del FIG2[("causal", 50_000_000)]
    # 50M / 12,000 + 6 + 250 s = 4,422.7 s
    assert "000-fig2: 1 run, whose input alone lasts about 1 h 14 min (N votes at " \
           "12,000/s each)" in " ".join(printed_first[0].split())
    # Both protocols at 200M: 2 x (16,666.7 + 6 + 70) s
    setup = fig_000_fig2.setup_of(FigureOptions(tmp_path, host="spark", options={
        "sizes": "200000000"}))
    assert fig_000_fig2.plan_line(setup) == (
        "000-fig2: 2 runs, whose input alone lasts about 9 h 18 min (N votes at 12,000/s "
        "each). --opt batch=2000 --opt build-rate=250000 --opt rate=80000 builds votes 20 "
        "times as fast")
    # Under an hour, no advice.
    assert fig_000_fig2.plan_line(fig_000_fig2.setup_of(FigureOptions(
        tmp_path, host="spark", options={"sizes": "1000000"}))).endswith("12,000/s each)")
    assert fig_000_fig2.about(59) == "about 1 min" and fig_000_fig2.about(3600) == \
        "about 1 h 0 min"


def test_fig2_builds_a_size_past_10_8_votes_in_the_batches_asked_for(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """200M votes built at 250,000/s in batches of 2,000: the run's input is past the
    10**8 records a topology once allowed, its sources batch as asked, and the plan says
    how long the input lasts at that pace."""
    seen: list[RunRequest] = []
    n = 200_000_000
    FIG2[("causal", n)] = FIG2[("causal", 100_000)]
    try:
        fig_000_fig2.run(FigureOptions(tmp_path, host="spark", options={
            **MASTER, "sizes": str(n), "protocols": "causal", "batch": "2000",
            "build-rate": "250000", "rate": "80000", "tail": "120"}), fig2_runner(seen))
    finally:
        del FIG2[("causal", n)]
    (req,) = seen
    inp = req.topology.input
    assert (inp.records, inp.batch, inp.rate) == (n + 80_000 * 126, 2_000, 250_000.0)
    assert inp.rate_change is not None and (inp.rate_change.at, inp.rate_change.rate) == \
        (n, 80_000.0)
    # 200M / 250,000 + 6 + 120 s = 926 s
    assert "000-fig2: 1 run, whose input alone lasts about 15 min (N votes at 250,000/s " \
           "each, 2,000 a batch)" in " ".join(capsys.readouterr().out.split())
    # Without the option the topology's own batch stays.
    default = fig_000_fig2.setup_of(FigureOptions(tmp_path, host="spark", options={}))
    assert default.batch is None
    assert default.topology(fig_000_fig2.load_topology(fig_000_fig2.SHARDER),
                            1_000).input.batch == 100


@pytest.mark.parametrize(("opts", "said"), [
    ({"sizes": "2000000000"}, "--opt: sizes: 2,000,304,000 votes with the settle and the "
     "tail, more than a source generates (1,000,000,000)"),
    ({"batch": "200000"}, "--opt: batch: 200,000 records, more than a batch holds (100,000)"),
])
def test_fig2_refuses_a_size_or_batch_past_the_topology_limits_in_one_line(
        opts: dict[str, str], said: str) -> None:
    out = CliRunner().invoke(app, ["figure", "000-fig2", "--opt", "master=spark://fake:7077",
                                   *(a for k, v in opts.items() for a in ("--opt", f"{k}={v}"))])
    assert out.exit_code == 2 and said in " ".join(out.output.split())
    assert "Traceback" not in out.output


def test_fig2_snapshot_bytes_read_sizes_what_replacements_restored(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    store.put(3, "shard[4]", Sealed(b"x" * 700))

    def started(instance: str, restore: int | None) -> HistoryEvent:
        return HistoryEvent(1, 1.0, "spark", "instance-started",
                            {"reason": "restart", "restore": restore}, instance=instance)

    read = fig_000_fig2.snapshot_bytes_read
    assert read([started("sharder[0]", None)], tmp_path) == 0  # stateless: nothing read
    assert read([started("shard[4]", 3), started("sharder[0]", None)], tmp_path) == 700
    assert read([started("shard[5]", 3)], tmp_path) is None  # gone: not sized, not 0


def _latency(p50_ms: float, behind: bool = False) -> list[tuple[str, float, float]]:
    """Samples whose median after the first second is ``p50_ms``; the first second's
    samples are large and must be ignored."""
    s = p50_ms / 1000
    warm = [("out[0]", 0.1 * k, 0.5) for k in range(5)]
    late = [("out[0]", 5.0, 3.0)] if behind else []
    return warm + [("out[0]", 1.0 + 0.1 * k, v) for k, v in
                   enumerate((s * 0.9, s, s, s * 1.1, s))] + late


# fig3 p50 ms per (protocol, rate, repeat)
FIG3 = {
    ("none", 4000.0): (2.0, 2.0), ("causal:clocks=off", 4000.0): (2.5, 3.0),
    ("causal", 4000.0): (2.75, 3.6),
    ("none", 12000.0): (2.0, 1.6), ("causal:clocks=off", 12000.0): (3.0, 2.0),
    ("causal", 12000.0): (3.0, 3.0),
}


# causal's piggyback per (rate, repeat), as HostResult.stats["piggyback"] has it:
# batches, clock-only batches, bytes per batch (mean), largest
FIG3_WIRE = {
    (4000.0, 0): (1000, 200, 40.0, 60), (4000.0, 1): (1200, 300, 44.0, 70),
    (12000.0, 0): (3000, 900, 41.0, 61), (12000.0, 1): (3300, 1000, 45.0, 66),
}


def fig3_runner(seen: list[RunRequest]) -> Any:
    def run(request: RunRequest, ext: Any) -> int:
        seen.append(request)
        proto, rate, rep = ext.key
        behind = (proto, rate, rep) == ("causal", 12000.0, 1)
        batches, only, mean, top = FIG3_WIRE[(rate, rep)] if proto == "causal" else \
            (500, 0, 20.0, 22) if proto == "causal:clocks=off" else (500, 0, 0.0, 0)
        ext.sample = fig_000_fig3.latency_sample(
            proto, rate, rep, True, _latency(FIG3[(proto, rate)][rep], behind), "r",
            {"batches": batches, "clock_only": only, "bytes": int(batches * mean),
             "max": top, "mean": mean})
        return 0
    return run


def test_fig3_medians_and_paired_overheads(tmp_path: Path) -> None:
    seen: list[RunRequest] = []
    res = fig_000_fig3.run(FigureOptions(tmp_path, host="spark", quick=True,
                                         options={**MASTER, "repeat": "2"}),
                           fig3_runner(seen))
    # interleaved: every rate and protocol once per sweep
    assert [(r.info.name, r.topology.input.rate) for r in seen[:3]] == [
        ("none", 4000.0), ("causal", 4000.0), ("causal", 4000.0)]
    assert seen[1].params.model_dump()["clocks"] == "off"
    assert seen[0].topology.input.records == 24_000  # 6 s at 4,000/s
    assert len(seen) == 12
    assert res.header == ("votes/s", "none p50 ms", "causal:clocks=off p50 ms",
                          "causal p50 ms", "clocks' overhead", "causal vs none overhead",
                          "causal piggyback B/batch mean (max)", "causal clock-only batches")
    # 4,000/s: clocks' +10% and +20% -> +15%; vs none +38% and +80% -> +59%
    # 12,000/s: clocks' +0% and +50% -> +25%; vs none +50% and +88% -> +69%
    # piggyback: median of the runs' means, largest of any run; clock-only: median of the
    # runs' counts and its share of their median batches (250 of 1,100; 950 of 3,150)
    assert res.rows == (
        ("4,000", "2.0", "2.8", "3.2", "+15% (+10%, +20%)", "+59% (+38%, +80%)",
         "42.0 (70)", "250 (23%)"),
        ("12,000", "1.8", "2.5", "3.0 (1 behind)", "+25% (+0%, +50%)",
         "+69% (+50%, +88%)", "43.0 (66)", "950 (30%)"))
    wire = [(m["protocol"], m["rate"], m["batches"], m["clock_only"], m["piggyback_mean"],
             m["piggyback_max"]) for m in res.summary["medians"]]
    assert wire == [("none", 4000.0, 500, 0, 0.0, 0),
                    ("causal:clocks=off", 4000.0, 500, 0, 20.0, 22),
                    ("causal", 4000.0, 1100, 250, 42.0, 70),
                    ("none", 12000.0, 500, 0, 0.0, 0),
                    ("causal:clocks=off", 12000.0, 500, 0, 20.0, 22),
                    ("causal", 12000.0, 3150, 950, 43.0, 66)]
    assert [(r["clock_only"], r["piggyback_max"]) for r in res.summary["runs"]
            if r["protocol"] == "causal"] == [(200, 60), (900, 61), (300, 70), (1000, 66)]
    saved = json.loads((tmp_path / "fig3.json").read_text())
    assert saved["medians"] == res.summary["medians"]
    assert res.summary["overheads"]["4000"]["clocks'"]["median"] == pytest.approx(0.15)
    assert res.summary["highest_on_schedule"] == {"none": 12000.0,
                                                  "causal:clocks=off": 12000.0,
                                                  "causal": 4000.0}
    assert "causal: highest load kept on schedule here 4,000 votes/s" in res.notes
    png = tmp_path / "fig3.png"
    assert png in res.files and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fig3_runs_each_point_in_the_batches_asked_for(tmp_path: Path) -> None:
    seen: list[RunRequest] = []
    res = fig_000_fig3.run(FigureOptions(tmp_path, host="spark", quick=True,
                                         options={**MASTER, "batch": "2000"}),
                           fig3_runner(seen))
    assert len(seen) == 6 and {r.topology.input.batch for r in seen} == {2_000}
    assert "2000 votes a batch" in res.title
    plain: list[RunRequest] = []
    fig_000_fig3.run(FigureOptions(tmp_path, host="spark", quick=True, options=MASTER),
                     fig3_runner(plain))
    assert {r.topology.input.batch for r in plain} == {100}


def test_fig3_compares_a_causal_variant_with_none_when_causal_did_not_run(
        tmp_path: Path) -> None:
    """A sweep of ``none`` and one form of causal (another snapshot rate) gives that
    form's overhead over none; its clocks' overhead needs its own clocks-off run."""
    variant = "causal:snapshot_every=100"
    samples = [fig_000_fig3.latency_sample(p, 4000.0, k, True, _latency(ms), "r")
               for k, (a, b) in enumerate([(2.0, 3.0), (2.0, 2.4)])
               for p, ms in (("none", a), (variant, b))]
    res = fig_000_fig3.result(samples, fig_000_fig3.QUICK, tmp_path)
    # no clocks' column: the variant has no clocks-off run of its own to compare with
    assert res.header[:4] == ("votes/s", "none p50 ms", f"{variant} p50 ms",
                              f"{variant} vs none overhead")
    assert res.rows[0][1:4] == ("2.0", "2.7", "+35% (+50%, +20%)")
    assert res.summary["overheads_of"] == variant
    assert fig_000_fig3.subject_of(["none", "causal:clocks=off", "causal", variant]) == (
        "causal")


def test_fig3_has_a_column_for_each_overhead_whose_runs_were_asked_for() -> None:
    shown = fig_000_fig3.shown_overheads
    assert shown(["none", "causal:clocks=off", "causal"], "causal") == [
        "clocks'", "causal vs none"]
    assert shown(["none", "causal"], "causal") == ["causal vs none"]
    assert shown(["causal:clocks=off", "causal"], "causal") == ["clocks'"]
    assert shown(["none"], "causal") == []


def test_fig3_says_when_a_protocol_kept_no_load_on_schedule() -> None:
    assert fig_000_fig3.kept_note("none", 32000.0) == (
        "none: highest load kept on schedule here 32,000 votes/s")
    assert fig_000_fig3.kept_note("causal", None) == (
        "causal: behind schedule in some run at every load measured")


def test_fig3_keeps_each_runs_piggyback_from_the_hosts_traffic() -> None:
    keep = fig_000_fig3._Keep("causal", 4000.0, 0)
    host = HostResult(outputs={}, complete=True, seconds=7.0, events=[], metrics=[],
                      records_in={}, records_out={}, latency=_latency(3.0),
                      stats={"channel_messages": 9, "piggyback": {
                          "batches": 480, "clock_only": 76, "bytes": 22_656, "max": 61,
                          "mean": 47.2}})
    ctx = SimpleNamespace(store=SimpleNamespace(run_id="run-7"))
    keep.keep(ctx, host, {"passed": True})  # type: ignore[arg-type]
    assert keep.sample is not None
    assert (keep.sample.p50_ms, keep.sample.batches, keep.sample.clock_only,
            keep.sample.piggyback_mean, keep.sample.piggyback_max, keep.sample.run_id) == \
        (3.0, 480, 76, 47.2, 61, "run-7")


@pytest.mark.parametrize(("args", "says"), [
    (["000-fig2", "--opt", "sizes=10k"], "sizes"),
    (["000-fig2", "--opt", "sizes=0,100"], "sizes"),
    (["000-fig2", "--opt", "tail=1,2"], "tail"),
    (["000-fig2", "--opt", "protocols=causal,nope"], "nope"),
    (["000-fig2", "--opt", "protocols=causal:depth=zero"], "depth"),
    (["000-fig3", "--opt", "repeat=1.5"], "repeat"),
    (["000-fig3", "--opt", "rates=-5"], "rates"),
    (["000-fig3", "--host", "sim"], "spark"),
])
def test_bad_options_are_one_line_exit_2(tmp_path: Path, args: list[str], says: str) -> None:
    res = CliRunner().invoke(app, ["figure", *args, "--out", str(tmp_path)])
    assert res.exit_code == 2, res.output
    assert says in res.output and "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_ctrl_c_during_a_run_stops_the_figure_in_one_line_exit_130(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``execute`` answers Ctrl-C by tearing its run down and returning 130: the figure
    stops there (no next point, no traceback) and says where the runs so far are."""
    from ftctl.run.execute import EXIT_INTERRUPTED

    seen: list[RunRequest] = []

    def interrupted(request: RunRequest, ext: Any) -> int:
        seen.append(request)
        return EXIT_INTERRUPTED

    import dataclasses

    import ftctl.commands.figure_cmd as cmd

    real = fig_000_fig2.run
    fig = dataclasses.replace(fig_000_fig2.FIGURE, run=lambda o: real(o, interrupted))
    monkeypatch.setattr(cmd, "figures", lambda: {fig.name: fig})
    res = CliRunner().invoke(app, ["figure", "000-fig2", "--quick", "--out", str(tmp_path),
                                   "--opt", "master=spark://fake:7077"])
    assert res.exit_code == 130, res.output
    assert len(seen) == 1
    assert "Traceback" not in res.output and "interrupted: 000-fig2 stopped" in res.output
