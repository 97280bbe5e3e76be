"""Fault types and the nemesis against a fake context of throwaway `sleep` processes."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil
import pytest

from chaos.arrivals import PAPER_MAX_S, PAPER_MIN_S, arrival_offsets
from chaos.context import FaultContext, Ledger, WorkerRef
from chaos.faults import (
    Delay,
    FaultError,
    KillExecutor,
    KillGroup,
    KillTask,
    KillWorker,
    Partition,
    Pause,
    RestoreCapacity,
    Slow,
)
from chaos.hostctx import HostFaultContext
from chaos.nemesis import Nemesis
from chaos.registry import FAULTS
from chaos.schedule import ScheduleError, plan, random_kills
from ftctl.config.scenario import FAULT_TYPES, PARAMS, RestoreParams, Scenario
from ftctl.kernel.history import History
from tests.fakectx import FakeContext

INSTANCES = ["lines[0]", "split[0]", "split[1]", "count[0]", "count[1]", "out[0]"]


@pytest.fixture
def ctx() -> Iterator[FakeContext]:
    fake = FakeContext()
    try:
        yield fake
    finally:
        fake.close()


def status(pid: int) -> str:
    return str(psutil.Process(pid).status())


def wait_for(predicate: object, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


def scenario(*faults: dict[str, object], seed: int = 1) -> Scenario:
    return Scenario.model_validate({"name": "t", "seed": seed, "faults": list(faults)})


# ---------------------------------------------------------------------------- fault types


def test_every_fault_type_has_a_class_with_the_scenario_params() -> None:
    assert set(FAULTS) == {n for n, k in FAULT_TYPES.items() if k.spark}
    for name, cls in FAULTS.items():
        assert cls.Params is PARAMS[name]
        assert cls.description == FAULT_TYPES[name].description
        assert cls.scope == FAULT_TYPES[name].scope
    assert isinstance(FakeContext(), FaultContext)


def test_kill_task_kills_the_task_process(ctx: FakeContext) -> None:
    pid = ctx.add_task("count[1]")
    other = ctx.add_task("count[0]")
    before = ctx.now()
    record = KillTask("count[1]").inject(ctx)
    assert wait_for(lambda: not ctx.alive(pid))
    assert ctx.alive(other)
    assert record.fault == "kill-task"
    assert record.target == "count[1]"
    assert record.pids == [pid]
    assert before <= record.t <= ctx.now()


def test_kill_task_of_a_task_that_is_not_running_is_a_fault_error(ctx: FakeContext) -> None:
    ctx.add_instances("count[0]")
    with pytest.raises(FaultError, match="not running"):
        KillTask("count[0]").inject(ctx)


def test_kill_executor_kills_the_ancestor_of_the_task(ctx: FakeContext) -> None:
    # bash stands in for the executor JVM, its sleep child for the task's Python worker.
    executor = ctx.spawn(["bash", "-c", "sleep 60 & wait"])
    assert wait_for(lambda: psutil.Process(executor.pid).children())
    task = psutil.Process(executor.pid).children()[0].pid
    ctx.add_task("split[0]", task)
    ctx.executors = {"exec-1": executor.pid}
    try:
        record = KillExecutor("split[0]").inject(ctx)
        assert record.pids == [executor.pid]
        assert wait_for(lambda: not ctx.alive(executor.pid))
    finally:
        psutil.Process(task).kill() if ctx.alive(task) else None


def test_kill_worker_by_selector_records_the_loss(ctx: FakeContext) -> None:
    a = ctx.add_worker({"rack": "a"})
    b = ctx.add_worker({"rack": "b"})
    ledger = Ledger()
    record = KillWorker("rack=b", ledger=ledger).inject(ctx)
    assert record.target == b.id and record.pids == [b.pid]
    assert [w for w, _ in ctx.killed] == [b.id]
    assert ledger.lost == [b]
    assert ctx.alive(a.pid)


def test_pause_stops_and_heal_continues(ctx: FakeContext) -> None:
    pid = ctx.add_task("count[0]")
    fault = Pause("count[0]", duration=1.0)
    record = fault.inject(ctx)
    assert record.pids == [pid]
    assert wait_for(lambda: status(pid) == psutil.STATUS_STOPPED)
    fault.heal(ctx)
    assert wait_for(lambda: status(pid) in (psutil.STATUS_SLEEPING, psutil.STATUS_RUNNING))
    fault.heal(ctx)  # idempotent


def test_kill_group_kills_only_matching_workers_within_the_window(ctx: FakeContext) -> None:
    rack_a = [ctx.add_worker({"rack": "a"}) for _ in range(3)]
    rack_b = [ctx.add_worker({"rack": "b"}) for _ in range(2)]
    ledger = Ledger()
    fault = KillGroup("rack=a", window=0.4, seed=7, ledger=ledger)
    record = fault.inject(ctx)
    killed = {w for w, _ in ctx.killed}
    assert killed == {w.id for w in rack_a}
    for w in rack_a:
        assert wait_for(lambda w=w: not ctx.alive(w.pid))
    assert all(ctx.alive(w.pid) for w in rack_b)
    times = [t for _, t in ctx.killed]
    assert all(record.t <= t <= record.t + 0.4 + 0.05 for t in times)
    offsets = [k["offset"] for k in record.details["kills"]]
    assert offsets == sorted(offsets) and all(0 <= o <= 0.4 for o in offsets)
    assert {w.id for w in ledger.lost} == killed
    # The same seed spreads the kills the same way.
    rng = random.Random(7)
    assert offsets == [round(o, 6) for o in sorted(rng.uniform(0, 0.4) for _ in range(3))]


def test_kill_group_needs_a_selector(ctx: FakeContext) -> None:
    with pytest.raises(FaultError, match="selector"):
        KillGroup("count[0]", window=1.0).inject(ctx)


def test_restore_capacity_progressive_starts_workers_one_by_one(ctx: FakeContext) -> None:
    ledger = Ledger()
    for i in range(3):
        ledger.add(WorkerRef(f"lost-{i}", 0, {"rack": "a"}))
    ledger.add(WorkerRef("lost-b", 0, {"rack": "b"}))
    # The paper's 2-6 minute arrivals scaled down to 0.12-0.36 s.
    params = {"mode": "progressive", "distribution": "paper", "scale": 0.001}
    fault = RestoreCapacity("rack=a", params, seed=11, ledger=ledger)
    record = fault.inject(ctx)
    expected = arrival_offsets(RestoreParams(**params), 3, random.Random(11))  # type: ignore[arg-type]
    assert len(ctx.started) == 3
    assert all(w.labels == {"rack": "a"} for w, _ in ctx.started)
    assert record.details["offsets"] == expected  # seeded: the same arrivals every time
    gaps = [t - record.t for _, t in ctx.started]
    assert gaps == sorted(gaps)
    for got, want in zip(gaps, expected, strict=True):
        assert want <= got <= want + 0.5  # never early; late only by scheduling noise
    assert all(PAPER_MIN_S * 0.001 <= o <= PAPER_MAX_S * 0.001 for o in expected)
    assert [w.id for w in ledger.lost] == ["lost-b"]  # the other rack stays lost


def test_restore_capacity_all_at_once(ctx: FakeContext) -> None:
    ledger = Ledger([WorkerRef(f"lost-{i}", 0, {"rack": "a"}) for i in range(2)])
    record = RestoreCapacity("rack=a", {"mode": "all"}, ledger=ledger).inject(ctx)
    assert len(ctx.started) == 2
    assert all(t - record.t < 0.1 for _, t in ctx.started)


def test_arrival_offsets() -> None:
    rng = random.Random(1)
    fixed = RestoreParams(mode="progressive", distribution="fixed", scale=2.0)
    assert arrival_offsets(fixed, 3, rng) == [2.0, 4.0, 6.0]
    uniform = RestoreParams(mode="progressive", distribution="uniform", min=1.0, max=3.0)
    offsets = arrival_offsets(uniform, 4, random.Random(5))
    gaps = [b - a for a, b in zip([0.0, *offsets], offsets, strict=False)]
    assert all(1.0 <= g <= 3.0 for g in gaps)
    assert offsets == arrival_offsets(uniform, 4, random.Random(5))


def test_slow_duty_cycle_stops_and_continues(ctx: FakeContext) -> None:
    pid = ctx.add_task("count[0]")
    fault = Slow("count[0]", {"factor": 4.0}, duration=1.0)
    fault.inject(ctx)
    seen = set()
    deadline = time.monotonic() + 0.6
    while time.monotonic() < deadline:
        seen.add(status(pid))
        time.sleep(0.005)
    fault.heal(ctx)
    assert psutil.STATUS_STOPPED in seen and len(seen) > 1
    assert wait_for(lambda: status(pid) != psutil.STATUS_STOPPED)
    time.sleep(0.15)  # no cycle thread left to stop it again
    assert status(pid) != psutil.STATUS_STOPPED


def test_channel_faults_are_requests_to_the_runtime(ctx: FakeContext) -> None:
    ctx.add_instances(*INSTANCES)
    fault = Delay("split[0]", {"ms": 50, "jitter_ms": 5, "peer": "count"}, duration=1.0, seed=3)
    record = fault.inject(ctx)
    (spec,) = ctx.channel_faults.values()
    assert spec.kind == "delay" and spec.src == "split[0]"
    assert spec.dst == ("count[0]", "count[1]")
    assert dict(spec.params) == {"ms": 50.0, "jitter_ms": 5.0}
    assert record.details["channel"]["id"] == spec.id
    fault.heal(ctx)
    fault.heal(ctx)
    assert ctx.channel_faults == {} and ctx.cleared == [spec.id]
    Partition("out[0]").inject(ctx)
    (cut,) = ctx.channel_faults.values()
    assert cut.kind == "partition" and cut.dst == ()


# ---------------------------------------------------------------------------- scheduling


def test_plan_expands_every_and_resolves_random_by_seed() -> None:
    sc = scenario(
        {"type": "kill-task", "every": 2.0, "target": "random"},
        {"type": "pause", "at": 1.5, "target": "count", "duration": 0.5},
        {"type": "kill-task", "every": 1.0, "count": 3, "target": "split[1]"},
    )
    planned = plan(sc, INSTANCES, duration=9.0)
    every = [p for p in planned if p.index == 0]
    assert [p.at for p in every] == [2.0, 4.0, 6.0, 8.0]
    assert all(p.target in INSTANCES for p in every)
    assert [p.at for p in planned if p.index == 2] == [1.0, 2.0, 3.0]
    (pause,) = [p for p in planned if p.index == 1]
    assert pause.target in ("count[0]", "count[1]")
    assert [p.at for p in planned] == sorted(p.at or 0 for p in planned)
    assert plan(sc, INSTANCES, 9.0) == planned
    other = [plan(scenario(*[f.model_dump() for f in sc.faults], seed=s), INSTANCES, 9.0)
             for s in range(2, 8)]
    assert any([p.target for p in o] != [p.target for p in planned] for o in other)


def test_plan_rejects_targets_the_topology_lacks() -> None:
    with pytest.raises(ScheduleError, match="no instance"):
        plan(scenario({"type": "kill-task", "at": 1, "target": "count[9]"}), INSTANCES, 5)
    with pytest.raises(ScheduleError, match="selector"):
        plan(scenario({"type": "kill-group", "at": 1, "target": "count", "window": 1}),
             INSTANCES, 5)


def test_random_kills_fall_in_the_middle_of_the_run() -> None:
    kills = random_kills(20, INSTANCES, 100.0, seed=4)
    assert len(kills) == 20
    assert all(20.0 <= k.at <= 80.0 for k in kills if k.at is not None)
    assert all(k.type == "kill-task" and k.target in INSTANCES for k in kills)
    assert kills == random_kills(20, INSTANCES, 100.0, seed=4)
    assert kills != random_kills(20, INSTANCES, 100.0, seed=5)


def test_nemesis_runs_the_schedule_and_logs_inject_and_heal(ctx: FakeContext) -> None:
    for iid in INSTANCES:
        ctx.add_task(iid)
    events: list[tuple[str, dict[str, object]]] = []
    sc = scenario(
        {"type": "kill-task", "at": 0.05, "target": "count[1]"},
        {"type": "pause", "at": 0.1, "target": "split[0]", "duration": 0.2},
    )
    nemesis = Nemesis.from_scenario(sc, ctx, duration=1.0,
                                    on_event=lambda kind, **d: events.append((kind, d)))
    nemesis.start()
    try:
        assert nemesis.wait(timeout=5.0)
    finally:
        nemesis.stop()
    kinds = [(k, d["type"]) for k, d in events]
    assert kinds == [("fault-injected", "kill-task"), ("fault-injected", "pause"),
                     ("fault-healed", "pause")]
    kill = events[0][1]
    assert kill["pids"] == [ctx.tasks["count[1]"]] and kill["target"] == "count[1]"
    assert not ctx.alive(ctx.tasks["count[1]"]) or wait_for(
        lambda: not ctx.alive(ctx.tasks["count[1]"]))
    heal_at, inject_at = events[2][1]["at"], events[1][1]["at"]
    assert 0.2 <= heal_at - inject_at < 0.4  # type: ignore[operator]
    assert status(ctx.tasks["split[0]"]) != psutil.STATUS_STOPPED


Events = list[tuple[str, dict[str, object]]]


def _started(ctx: FakeContext, sc: Scenario) -> tuple[Nemesis, Events]:
    """A nemesis for ``sc`` on every instance of ``ctx``, started, and its event list."""
    for iid in INSTANCES:
        ctx.add_task(iid)
    events: list[tuple[str, dict[str, object]]] = []
    nemesis = Nemesis.from_scenario(sc, ctx, duration=5.0,
                                    on_event=lambda kind, **d: events.append((kind, d)))
    nemesis.start()
    return nemesis, events


def test_during_checkpoint_fires_only_while_a_snapshot_is_in_progress(ctx: FakeContext) -> None:
    sc = scenario({"type": "kill-task", "trigger": "during-checkpoint", "count": 2,
                   "target": "random"})
    nemesis, events = _started(ctx, sc)
    try:
        time.sleep(0.2)
        assert events == []  # no snapshot yet
        ctx.snapshot = True
        assert wait_for(lambda: len(events) == 1)
        time.sleep(0.1)
        assert len(events) == 1  # the same snapshot does not strike twice
        ctx.snapshot = False
        looked = ctx.snapshot_looks
        # the nemesis sees the snapshot end (on a busy machine 50 ms were not enough)
        assert wait_for(lambda: ctx.snapshot_looks > looked)
        ctx.snapshot = True
        assert wait_for(lambda: len(events) == 2)
        assert nemesis.wait(timeout=2.0)  # count reached: the nemesis is done
    finally:
        nemesis.stop()
    assert [k for k, _ in events] == ["fault-injected", "fault-injected"]
    assert all(d["target"] in INSTANCES for _, d in events)


def test_after_a_fault_strikes_its_delay_after_that_fault_was_injected(
        ctx: FakeContext) -> None:
    sc = scenario(
        {"id": "a", "type": "kill-task", "at": 0.05, "target": "count[1]"},
        {"id": "b", "type": "kill-task", "after": {"fault": "a", "delay": "300ms"},
         "target": "split[0]"},
        {"type": "kill-task", "after": {"fault": "b", "delay": 0.3}, "target": "count[0]"},
    )
    nemesis, events = _started(ctx, sc)
    try:
        assert nemesis.wait(timeout=5.0)  # followers count as busy until they struck
    finally:
        nemesis.stop()
    hits = [(d["target"], d["at"]) for k, d in events if k == "fault-injected"]
    assert [t for t, _ in hits] == ["count[1]", "split[0]", "count[0]"]
    (_, a), (_, b), (_, c) = hits
    # The poll (10 ms) and the kill itself come on top of the delay, never before it; a
    # busy machine can add a few tenths, a delay counted twice would add 0.3 s.
    assert 0.3 <= b - a < 0.55 and 0.3 <= c - b < 0.55  # type: ignore[operator]
    recorded = nemesis.recorded()["faults"]
    assert [f["after_fault"] for f in recorded if f["fired_at"] is not None] == [None, 0, 1]


def test_after_a_phase_strikes_once_its_delay_after_the_phase_opens(ctx: FakeContext) -> None:
    sc = scenario({"type": "kill-task", "after": {"phase": "draining", "delay": 0.2},
                   "target": "count[0]"})
    nemesis, events = _started(ctx, sc)
    try:
        time.sleep(0.1)
        assert events == []
        opened = ctx.now()
        ctx.phases.add("draining")
        assert wait_for(lambda: len(events) == 1)
        assert 0.2 <= float(events[0][1]["at"]) - opened < 0.3  # type: ignore[arg-type]
        ctx.phases.clear()
        time.sleep(0.05)
        ctx.phases.add("draining")
        assert nemesis.wait(timeout=2.0)  # count 1 (the default): done
    finally:
        nemesis.stop()
    assert len(events) == 1


def test_stop_heals_active_faults_and_is_idempotent(ctx: FakeContext) -> None:
    pid = ctx.add_task("count[0]")
    ctx.add_instances(*INSTANCES)
    sc = scenario(
        {"type": "pause", "at": 0.0, "target": "count[0]"},  # no duration: until stop
        {"type": "partition", "at": 0.0, "target": "split[0]", "duration": 60},
    )
    events: list[str] = []
    nemesis = Nemesis.from_scenario(sc, ctx, duration=5.0,
                                    on_event=lambda kind, **d: events.append(kind))
    nemesis.start()
    try:
        assert wait_for(lambda: status(pid) == psutil.STATUS_STOPPED)
        assert wait_for(lambda: len(ctx.channel_faults) == 1)
    finally:
        nemesis.stop()
    nemesis.stop()
    assert status(pid) != psutil.STATUS_STOPPED
    assert ctx.channel_faults == {}
    assert events.count("fault-healed") == 2


def test_stop_cuts_a_group_kill_short(ctx: FakeContext) -> None:
    workers = [ctx.add_worker({"rack": "a"}) for _ in range(3)]
    sc = scenario({"type": "kill-group", "at": 0.0, "target": "rack=a", "window": 30.0})
    nemesis = Nemesis.from_scenario(sc, ctx, duration=5.0)
    nemesis.start()
    time.sleep(0.1)
    started = time.monotonic()
    nemesis.stop()
    assert time.monotonic() - started < 2.0
    assert len(ctx.killed) < len(workers)


def test_failed_inject_is_logged_and_the_run_goes_on(ctx: FakeContext) -> None:
    ctx.add_instances(*INSTANCES)  # no task is running
    events: list[tuple[str, dict[str, object]]] = []
    nemesis = Nemesis.from_scenario(
        scenario({"type": "kill-task", "at": 0.0, "target": "out[0]"}), ctx, 1.0,
        on_event=lambda kind, **d: events.append((kind, d)))
    nemesis.defer_limit = 0.3  # the target never comes back
    nemesis.start()
    assert nemesis.wait(3.0)
    nemesis.stop()
    assert [k for k, _ in events] == ["fault-deferred", "fault-error"]
    assert "not running" in str(events[1][1]["error"]) and "waited" in str(events[1][1]["error"])


def test_a_kill_of_a_restarting_task_strikes_once_it_runs_again(ctx: FakeContext) -> None:
    ctx.add_instances(*INSTANCES)  # out[0] is being restarted: no task yet
    events: list[tuple[str, dict[str, object]]] = []
    nemesis = Nemesis.from_scenario(
        scenario({"type": "kill-task", "at": 0.0, "target": "out[0]"}), ctx, 1.0,
        on_event=lambda kind, **d: events.append((kind, d)))
    nemesis.start()
    assert wait_for(lambda: [k for k, _ in events] == ["fault-deferred"])
    pid = ctx.add_task("out[0]")  # the replacement registers
    assert nemesis.wait(5.0)
    nemesis.stop()
    assert [k for k, _ in events] == ["fault-deferred", "fault-injected"]
    assert events[1][1]["pids"] == [pid] and wait_for(lambda: not ctx.alive(pid))


def test_record_and_replay_round_trip(ctx: FakeContext) -> None:
    for iid in INSTANCES:
        ctx.add_task(iid)
    sc = scenario(
        {"type": "delay", "every": 0.05, "count": 3, "target": "random", "duration": 0.05,
         "params": {"ms": 10}},
        {"type": "kill-task", "trigger": "during-checkpoint", "count": 1, "target": "random"},
        seed=9,
    )
    history = History("spark", ctx.now)
    nemesis = Nemesis.from_scenario(sc, ctx, duration=1.0, on_event=history.write)
    ctx.snapshot = True
    nemesis.start()
    try:
        assert nemesis.wait(3.0)
    finally:
        nemesis.stop()
    record = nemesis.recorded()
    fired = [f for f in record["faults"] if f["fired_at"] is not None]
    assert len(fired) == 4
    replay = Nemesis.from_record(record, ctx)
    got = [(p.type, p.target, p.at, p.seed) for p in replay.schedule]
    want = sorted((f["type"], f["target"], f["fired_at"], f["seed"]) for f in fired)
    # Two occurrences a busy nemesis fired late can share a firing time: compare whole.
    assert sorted(got) == sorted(want)
    assert all(p.trigger is None for p in replay.schedule)
    from_log = Nemesis.from_events(history.events, ctx)

    def order(p: Any) -> tuple[Any, ...]:
        return (p.type, p.at or 0, str(p.target), p.seed)

    assert sorted(from_log.schedule, key=order) == sorted(replay.schedule, key=order)


def test_run_store_event_is_the_event_callback(ctx: FakeContext, tmp_path: Path) -> None:
    from ftctl.results import RunStore

    store = RunStore.create(tmp_path, topology="t", protocol="none")
    for iid in INSTANCES:
        ctx.add_task(iid)
    ctx.add_worker({"rack": "a"})
    sc = scenario(
        {"type": "kill-task", "at": 0.0, "target": "random"},
        {"type": "kill-group", "at": 0.0, "target": "rack=a", "window": 0.05},
        {"type": "restore-capacity", "at": 0.1, "target": "rack=a"},
    )
    nemesis = Nemesis.from_scenario(sc, ctx, duration=1.0, on_event=store.event)
    nemesis.start()
    try:
        assert nemesis.wait(3.0)
    finally:
        nemesis.stop()
    history = store.read_history()
    assert [e.kind for e in history].count("fault-injected") == 3
    assert {"worker-killed", "worker-started"} <= {
        e.data["step"] for e in history if e.kind == "fault-step"}
    assert all(e.fault == f"{e.data['index']}.{e.data['occurrence']}" for e in history)
    replay = Nemesis.from_events(history, ctx)
    assert [p.type for p in replay.schedule] == [p.type for p in nemesis.schedule]


# ---------------------------------------------------------------------------- host adapter


class _FakeCluster:
    """LocalCluster's fault-facing methods over sleep processes."""

    def __init__(self, ctx: FakeContext) -> None:
        self.ctx = ctx
        self.recorded: list[SimpleNamespace] = []

    def add(self, labels: dict[str, str]) -> SimpleNamespace:
        w = SimpleNamespace(name=f"w{len(self.recorded)}", pid=self.ctx.spawn().pid,
                            labels=labels, killed=False)
        self.recorded.append(w)
        return w

    def workers(self, include_killed: bool = False) -> list[SimpleNamespace]:
        return [w for w in self.recorded if include_killed or not w.killed]

    def worker_pids(self) -> dict[str, int]:
        return {w.name: w.pid for w in self.workers() if self.ctx.alive(w.pid)}

    def kill_worker(self, which: str | int, sig: int = 9) -> SimpleNamespace:
        (w,) = [w for w in self.recorded if w.name == which]
        psutil.Process(w.pid).kill()
        w.killed = True
        return w

    def start_worker(self, labels: object = None, *, wait: bool = True) -> SimpleNamespace:
        assert wait is False  # the nemesis must not block on a JVM start
        return self.add(dict(labels) if isinstance(labels, dict) else {})


def test_host_context_adapts_a_cluster_backend(ctx: FakeContext) -> None:
    cluster = _FakeCluster(ctx)
    a, _ = cluster.add({"rack": "a"}), cluster.add({"rack": "b"})
    host = HostFaultContext(clock=ctx.now, instance_ids=INSTANCES,
                            task_pids={"count[0]": 123}.get, cluster=cluster)
    assert isinstance(host, FaultContext)
    assert host.task_pid("out[0]") is None
    with pytest.raises(FaultError, match="not signalled"):  # 123 runs under no worker
        host.task_pid("count[0]")
    assert [w.id for w in host.workers()] == ["w0", "w1"]
    ledger = Ledger()
    KillGroup("rack=a", window=0.01, ledger=ledger).inject(host)
    assert wait_for(lambda: not ctx.alive(a.pid))
    assert [w.id for w in host.workers()] == ["w1"]
    RestoreCapacity("rack=a", ledger=ledger).inject(host)
    assert [(w.id, dict(w.labels)) for w in host.workers()] == [
        ("w1", {"rack": "b"}), ("w2", {"rack": "a"})]
    with pytest.raises(FaultError, match="not supported"):
        Delay("count[0]", {"ms": 5}).inject(host)
    no_tasks: dict[str, int] = {}
    bare = HostFaultContext(clock=ctx.now, instance_ids=INSTANCES, task_pids=no_tasks.get)
    with pytest.raises(FaultError, match="--master"):
        KillWorker("rack=a").inject(bare)


def test_a_random_kill_of_a_restarting_task_takes_a_running_one(ctx: FakeContext) -> None:
    ctx.add_instances("lines[0]", "count[0]")  # neither runs: both being restarted
    running = ctx.add_task("count[1]")
    (planned,) = random_kills(1, ["count[0]"], 1.0, seed=3)
    assert planned.retarget and planned.target == "count[0]"
    events: list[tuple[str, dict[str, object]]] = []
    nemesis = Nemesis([planned], ctx, lambda kind, **d: events.append((kind, d)))
    nemesis.start()
    assert nemesis.wait(5.0)
    nemesis.stop()
    assert [k for k, _ in events] == ["fault-retargeted", "fault-injected"]
    assert events[0][1]["to"] == "count[1]" and events[1][1]["pids"] == [running]
    assert nemesis.recorded()["faults"][0]["target"] == "count[1]"  # replays hit it too


def test_undelivered_faults_fail_the_run_unless_optional() -> None:
    from ftctl.metrics.runreport import injected, undelivered

    planned = {"optional": True}
    events = [  # a stored version 1 log
        {"kind": "fault-inject", "t": 1.0, "fault": "kill-task", "resolved": "a[0]"},
        {"kind": "fault-error", "t": 2.0, "fault": "kill-task", "target": "b[0]",
         "error": "b[0] is not running (waited 30.0 s)", "planned": {"optional": False}},
        {"kind": "fault-error", "t": 3.0, "fault": "pause", "target": "c[0]",
         "error": "c[0] is not running (waited 30.0 s)", "planned": planned},
    ]
    assert [f["target"] for f in undelivered(injected(events))] == ["b[0]"]
    sc = scenario({"type": "kill-task", "at": 1.0, "target": "random", "optional": True},
                  {"type": "kill-task", "at": 2.0, "target": "count[0]"})
    first, second = plan(sc, INSTANCES, 10.0)
    assert (first.optional, first.retarget) == (True, True)
    assert (second.optional, second.retarget) == (False, False)


def test_a_trigger_on_a_phase_the_protocol_never_enters_is_refused() -> None:
    from typer.testing import CliRunner

    from ftctl.cli import app

    root = Path(__file__).resolve().parent.parent
    args = [str(root / "topologies/wordcount.yaml"), "--scenario",
            str(root / "chaos/kill-during-checkpoint.yaml")]
    for protocol in ("lineage", "none"):
        res = CliRunner().invoke(app, ["chaos", *args, "-p", protocol])
        assert res.exit_code == 2, res.output
        assert "kill-during-checkpoint.yaml" in res.output
        assert f"{protocol} never enters 'snapshotting'" in res.output
    res = CliRunner().invoke(app, ["compare", "protocols", *args, "--protocols",
                                   "checkpoint,lineage"])
    assert res.exit_code == 2 and "lineage never enters 'snapshotting'" in res.output


def test_compare_on_a_running_cluster_refuses_what_it_cannot_deliver_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`compare --master` attaches every run to a running cluster: a worker fault there is
    refused before anything starts, as `chaos --master` refuses it, and so is a URL that
    is not a master's, or a worker kill the engine would have to carry out on workers of a
    cluster ftctl did not start (a protocol's task kills its own worker there)."""
    from typer.testing import CliRunner

    from ftctl.cli import app
    from tests.conftest import ROOT

    topo = str(ROOT / "topologies/wordcount.yaml")
    res = CliRunner().invoke(app, ["compare", "protocols", topo, "--kill", "1",
                                   "--master", "http://127.0.0.1:7077"])
    assert res.exit_code == 2 and "expected spark://host:port" in res.output
    res = CliRunner().invoke(app, ["compare", "protocols", topo, "--master",
                                   "spark://127.0.0.1:7077", "--scenario",
                                   str(ROOT / "chaos/rack-failure.yaml")])
    assert res.exit_code == 2 and "rack-failure.yaml" in res.output, res.output
    monkeypatch.setenv("FTCTL_STATE_DIR", str(tmp_path / "none"))  # no `cluster up` here
    worker = tmp_path / "worker.yaml"
    worker.write_text("name: w\nfaults:\n  - {type: kill-worker, at: 2.0, target: 'count[0]'}\n")
    res = CliRunner().invoke(app, ["compare", "protocols", topo, "--scenario", str(worker),
                                   "--master", "spark://127.0.0.1:7077", "--protocols",
                                   "checkpoint,structured-streaming"])
    assert res.exit_code == 2 and "needs the workers of a cluster ftctl started" in \
        res.output, res.output
