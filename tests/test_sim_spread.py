"""``ftctl sim -j N``: schedules over local processes, the same summary as in one process."""

from __future__ import annotations

import gc
import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

from ftctl.cli import app
from ftctl.cluster.process import wait_until
from ftctl.sim.runner import SimSummary
from ftctl.sim.spread import (
    CHUNK,
    SimJob,
    fold,
    local_pool,
    run_parallel,
    spread,
    start_method,
)
from protocols.contract.params import validate
from tests.conftest import TOPOLOGIES, load

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()
# A planted bug: most schedules violate, so failing seeds and anomaly counts are compared too.
MUTANT = "checkpoint/commit-early"


def _job() -> SimJob:
    from protocols.registry import resolve

    info, params = resolve(MUTANT)
    return SimJob(load("diamond"), MUTANT, validate(info.params, params, info.name),
                  kinds=("crash", "pause", "delay"))


def _same(a: SimSummary, b: SimSummary) -> None:
    assert (a.schedules, a.failures, a.faults, a.fallbacks) == \
        (b.schedules, b.failures, b.faults, b.fallbacks)
    assert a.failing_seeds == b.failing_seeds and a.violations == b.violations
    assert a.delays == b.delays and a.resent == b.resent  # per seed, exactly
    assert a.piggyback_totals() == b.piggyback_totals() and a.piggyback["batches"] > 0
    assert a.first_failure is not None and b.first_failure is not None
    assert a.first_failure.seed == b.first_failure.seed
    assert a.first_failure.verdict.totals() == b.first_failure.verdict.totals()


def test_two_processes_give_exactly_the_summary_of_one() -> None:
    job = _job()
    sim = job.simulator()
    serial = sim.run_many(30, 5)
    seen: list[int] = []
    spread = run_parallel(sim, job, 30, 5, processes=2, progress=seen.append)
    assert serial.failing_seeds and len(serial.failing_seeds) < 30, "a mix, not all one way"
    _same(serial, spread)
    assert seen[-1] == 30 and seen == sorted(seen)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_forked_and_spawned_workers_give_the_summary_of_one_process(method: str) -> None:
    job = _job()
    sim = job.simulator()
    serial = sim.run_many(30, 5)
    with local_pool(sim, job, 2, method) as pool:
        _same(serial, run_parallel(sim, job, 30, 5, processes=2, pool=pool))


def test_forked_workers_run_on_the_parents_simulator(monkeypatch: pytest.MonkeyPatch) -> None:
    """They build nothing (the golden and fault-free runs took seconds each on the Nexmark
    files): a forked worker that tried would raise here."""
    job = _job()
    sim = job.simulator()
    serial = sim.run_many(12, 1)

    def no_build(self: SimJob) -> None:
        raise AssertionError("a forked worker built its own simulator")

    monkeypatch.setattr(SimJob, "simulator", no_build)
    with local_pool(sim, job, 2, "fork") as pool:
        _same(serial, run_parallel(sim, job, 12, 1, processes=2, pool=pool))
    assert gc.isenabled() and gc.get_freeze_count() == 0  # the parent's collector back


def test_a_worker_that_cannot_build_its_simulator_fails_the_run_not_hangs_it() -> None:
    """A spawned worker builds its own simulator when it starts; if that raises, the pool
    would replace the dead worker with one that dies the same way, forever."""
    import dataclasses

    from protocols.registry import UnknownProtocol

    job = _job()
    sim = job.simulator()
    broken = dataclasses.replace(job, protocol="no-such-protocol")

    def hung(signum: int, frame: object) -> None:
        raise TimeoutError("the pool never gave the workers' error back")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        with local_pool(sim, broken, 2, "spawn") as pool, \
                pytest.raises(UnknownProtocol, match="no-such-protocol"):
            run_parallel(sim, broken, 8, 1, processes=2, pool=pool)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_workers_are_forked_only_while_no_other_thread_runs() -> None:
    assert start_method() == ("fork" if threading.active_count() == 1 else "spawn")
    ready, done = threading.Event(), threading.Event()
    thread = threading.Thread(target=lambda: (ready.set(), done.wait(5)))
    thread.start()
    try:
        ready.wait(5)
        assert start_method() == "spawn"  # a progress display's thread, say
    finally:
        done.set()
        thread.join()


def test_a_few_seeds_still_go_to_every_process() -> None:
    few = spread(7, 5, 2)  # five schedules of a large topology, two processes
    assert len(few) >= 2 and [s for c in few for s in c] == list(range(7, 12))
    many = spread(1, 300, 2)
    sizes = [len(c) for c in many]
    assert sizes[0] == CHUNK and sizes == sorted(sizes, reverse=True) and sizes[-1] == 1
    assert [s for c in many for s in c] == list(range(1, 301))


@pytest.mark.parametrize(("n", "processes"), [(40, 2), (30, 2), (64, 2), (24, 3), (100, 4)])
def test_chunks_are_small_enough_that_the_processes_end_together(n: int,
                                                                 processes: int) -> None:
    """Each process takes the next chunk once it is done: with schedules of equal length,
    the busiest and the idlest end at most a quarter of an even share apart (40 seeds in
    chunks of 8 on two processes went 24 and 16)."""
    parts = spread(1, n, processes)
    assert [s for c in parts for s in c] == list(range(1, n + 1))
    busiest = [0] * processes
    for c in parts:  # greedy, as the pool hands them out
        busiest[busiest.index(min(busiest))] += len(c)
    assert max(busiest) - min(busiest) <= n / processes / 4, (n, [len(c) for c in parts])


@pytest.mark.parametrize(("n", "processes"), [(40, 2), (41, 2), (300, 2), (100, 4)])
def test_processes_end_at_most_a_schedule_apart_when_schedules_differ(n: int,
                                                                     processes: int) -> None:
    """Schedules differ in length by their faults: the chunks shrink to single seeds at the
    end, so whichever process draws the long ones, the last to end ends at most one
    schedule after the first (equal chunks of 5 could leave one idle for five)."""
    import random

    parts = spread(1, n, processes)
    for trial in range(50):
        rng = random.Random(trial)
        cost = {s: rng.uniform(1.5, 3.0) for s in range(1, n + 1)}
        done = [0.0] * processes
        for c in parts:  # the pool hands the next chunk to the first process free
            i = done.index(min(done))
            done[i] += sum(cost[s] for s in c)
        ends = sorted(done)
        assert ends[-1] - ends[0] <= max(cost.values()), (trial, [len(c) for c in parts])


def _fives(first: int, n: int) -> list[range]:
    return [range(s, min(s + 5, first + n)) for s in range(first, first + n, 5)]


def test_fail_fast_stops_at_the_same_seed_in_any_order_of_arrival() -> None:
    job = _job()
    sim = job.simulator()
    serial = sim.run_many(30, 3, fail_fast=True)
    # Batches arrive whole, the first violation mid-batch: the fold cuts there.
    records = [[sim.record(sim.run_one(s)) for s in c] for c in _fives(3, 30)]
    folded = fold(sim, records, fail_fast=True)
    _same(serial, folded)
    assert folded.schedules == serial.failing_seeds[0] - 3 + 1


def test_cli_json_is_the_same_for_one_and_two_processes() -> None:
    args = ["sim", str(TOPOLOGIES / "diamond.yaml"), "-p", MUTANT, "-n", "24", "--json",
            "--faults", "crash,slow,node", "--first-seed", "11"]
    docs = []
    for jobs in ("1", "2"):
        res = runner.invoke(app, [*args, "-j", jobs])
        assert res.exit_code == 1, res.output  # the mutant violates
        doc = json.loads(res.stdout)
        doc.pop("seconds")
        docs.append(doc)
    assert docs[0] == docs[1]
    assert docs[0]["schedules"] == 24 and docs[0]["failing_seeds"]


@pytest.mark.parametrize(("extra", "message"), [
    (["--master", "yarn"], "--master: expected spark://host:port or 'local', got 'yarn'"),
    (["--master", "local", "-j", "2"], "--jobs: runs local processes; --master runs on a "
     "cluster instead: give one of them"),
])
def test_bad_spread_options_are_one_line(extra: list[str], message: str) -> None:
    res = runner.invoke(app, ["sim", str(TOPOLOGIES / "wordcount.yaml"), *extra])
    assert res.exit_code == 2
    assert res.stderr.strip() == f"error: {message}"


def test_workers_die_with_a_killed_parent(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ftctl.cli", "sim", str(TOPOLOGIES / "wordcount.yaml"),
         "-n", "100000", "-j", "2", "--json"], cwd=tmp_path,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    parent = psutil.Process(proc.pid)
    try:
        assert wait_until(lambda: len(_workers(parent)) == 2, 60), "two workers start"
        workers = _workers(parent)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        # A worker ties itself to its parent in the pool's initializer, after its spawn
        # has imported ftctl: seconds on a loaded machine. One that was still importing
        # finds its parent gone there and exits; a worker left untied would instead run
        # its share of 100,000 schedules, far longer than this wait.
        _gone, alive = psutil.wait_procs(workers, timeout=60)
        assert not alive, f"workers outlived their parent: {alive}"
    finally:
        for p in [parent, *_workers(parent)]:
            if p.is_running():
                p.kill()


def _workers(parent: psutil.Process) -> list[psutil.Process]:
    try:
        # The spawn start method adds a resource tracker: not a worker.
        return [c for c in parent.children() if "resource_tracker" not in " ".join(c.cmdline())]
    except psutil.Error:
        return []
