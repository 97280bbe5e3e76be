"""A run of a topology on Structured Streaming: feed, driver, faults, verdict.

ftctl writes the input as the run goes (``feed``), runs the queries in a driver process of
their own (``driverproc``), carries out the faults of the schedule on that process
(``kill-driver``: the whole driver group; ``kill-task``: a Python worker running one of
its tasks; ``corrupt``/``truncate``/``delete``: a file of the checkpoint location,
``checkpoint_faults``), restarts the driver from its checkpoint location whenever it ends before the
input is drained, and writes the run's history with the kinds every run uses
(``failure-detected``, ``instance-started``, ``fault-injected``, ``output-committed``), so
recovery metrics, the report and ``compare`` read it as they read a protocol's run.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from ftctl.cluster.watchdog import Watchdog
from ftctl.config.topology import Topology
from ftctl.console import EXIT_FAILED, EXIT_INFRA, EXIT_OK, err_console
from ftctl.engines import STRUCTURED
from ftctl.engines.structured import driverproc, sinkdir
from ftctl.engines.structured.checkpoint_faults import DAMAGE, damage
from ftctl.engines.structured.feed import Feed
from ftctl.engines.structured.plan import compile_plan
from ftctl.engines.structured.workers import WorkerFaults, live_workers
from ftctl.results import RunStore, atomic_write_json
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.golden import golden_output
from ftctl.verify.golden import golden_files
from ftctl.verify.outofcore import verify_outputs
from protocols.contract.spec import Guarantee

DRIVER = "driver"  # the instance name the history gives the driver
START_TIMEOUT = 180.0  # a driver whose queries are not running by then: infrastructure error
# A commit-point kill waits this long for a batch to be held (a cold driver's first batch
# takes tens of seconds on a busy machine), then strikes anyway.
HELD_WAIT = 180.0
MAX_RESTARTS = 20
# Restarts in a row that committed no batch: the query fails on its own (a bug, not a
# fault), and restarting it again would only repeat the failure.
MAX_FRUITLESS = 3
EXIT_INTERRUPTED = 130
KILL_POINTS = ("any", "commit")
FAULTS = ("kill-driver", "kill-task", "kill-executor", *DAMAGE)


@dataclass
class Fault:
    at: float  # seconds after the input starts
    type: str  # kill-driver | kill-task | kill-executor | corrupt | truncate | delete
    index: int = 0
    # A store fault's: the operator whose sinks' checkpoint locations it strikes (every
    # sink's when it names none), the batch or version (``snapshot``), where in the file.
    target: str = ""
    snapshot: int | None = None
    where: float = 0.5
    # A worker fault on a cluster: the scenario's planned fault, which the protocols'
    # realization strikes (``workers``). Else None.
    planned: Any = None
    # In local mode, the worker or executor fault this driver kill stands for.
    instead_of: str = ""


@dataclass
class EngineRequest:
    topology: Topology
    mutant: str | None = None
    master: str = "local[2]"
    results: Path = Path("results")
    timeout: float = 600.0
    trigger_ms: int = 500
    kill_point: str = "any"
    checkpoint_file: str = "offsets"  # the log of the checkpoint location store faults strike
    faults: list[Fault] = field(default_factory=list)
    kind: str = "run"
    quiet: bool = False
    as_json: bool = False
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)  # filled in by ``execute``
    # The standalone cluster ftctl started (or attached to) whose workers the worker
    # faults strike; ``master`` is its URL. None: local mode, or a cluster ftctl has not
    # the processes of.
    cluster: Any = None

    @property
    def label(self) -> str:
        return STRUCTURED if self.mutant is None else f"{STRUCTURED}/{self.mutant}"


class _DriverLog:
    """The driver's events file, read as it grows (whole lines only)."""

    def __init__(self, path: Path) -> None:
        self.path, self.pos, self.events = path, 0, []  # type: ignore[var-annotated]
        # Called on every new event, wherever it is polled from (the main loop, a wait).
        self.hook: Any = None

    def poll(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with open(self.path) as f:
            f.seek(self.pos)
            chunk = f.read()
        complete = chunk[:chunk.rfind("\n") + 1]
        self.pos += len(complete.encode())
        new = [json.loads(line) for line in complete.splitlines() if line.strip()]
        self.events.extend(new)
        for ev in new if self.hook is not None else ():
            self.hook(ev)
        return new


class _SchedulerLog:
    """Spark's own word on the query's executors, read from the driver's log as it grows:
    ``Lost executor N`` (the scheduler's line) is a detection, and the first ``Starting
    task`` after it (the task set manager's, which the driver logs on a cluster) is the
    lost work launched again on a live executor: the restart. On a cluster an executor
    loss is seen there, not by a driver that ends."""

    LOST = "Lost executor "
    START = "Starting task "

    def __init__(self) -> None:
        self.path: Path | None = None
        self.pos = 0

    def follow(self, path: Path) -> None:
        self.path, self.pos = path, 0

    def poll(self) -> list[tuple[str, str]]:
        """The new lines, as (``lost`` or ``start``, the line from the mark on)."""
        if self.path is None or not self.path.exists():
            return []
        with open(self.path, "rb") as f:
            f.seek(self.pos)
            chunk = f.read()
        complete = chunk[:chunk.rfind(b"\n") + 1]
        self.pos += len(complete)
        out = []
        for line in complete.decode(errors="replace").splitlines():
            for kind, mark in (("lost", self.LOST), ("start", self.START)):
                if mark in line:
                    out.append((kind, line[line.index(mark):].strip()))
        return out


class _Rescheduled:
    """Executors lost and not yet followed by a task launch: each detection's restart is
    the first launch after it (one launch answers every loss before it)."""

    def __init__(self) -> None:
        self.waiting: list[str] = []

    def lines(self, store: RunStore, out: _Outcome, lines: list[tuple[str, str]]) -> None:
        for kind, line in lines:
            if kind == "lost":
                executor = f"executor {line.split()[2]}"
                out.detections += 1
                store.event("failure-detected", instances=[executor], cause="executor-lost",
                            reasons=[line])
                if executor not in self.waiting:
                    self.waiting.append(executor)
            elif self.waiting:
                for executor in self.waiting:
                    out.rescheduled += 1
                    store.event("instance-started", instance=executor, reason="rescheduled",
                                start="task")
                self.waiting = []


def execute(req: EngineRequest) -> int:
    """Run, verify, report; the exit code of ``ftctl run``/``chaos``."""
    topology = req.topology
    plan = compile_plan(topology)
    store = RunStore.create(req.results, topology=topology.name, protocol=STRUCTURED,
                            kind=req.kind)
    # Absolute: the driver runs in the engine folder and reads every path of the spec
    # from there (``--results`` is relative by default).
    run_dir = store.path.resolve()
    eng = run_dir / "engine"
    dirs = {name: eng / name for name in ("input", "sinks", "control")}
    dirs["checkpoints"] = run_dir / "checkpoints"  # the checkpoint location, in the run
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    store.write_config({
        "topology": topology.model_dump(by_alias=True), "protocol": req.label,
        "engine": STRUCTURED, "mutant": req.mutant, "master": req.master, "host": "spark",
        "params": {"trigger_ms": req.trigger_ms, "kill_point": req.kill_point},
        "store": str(dirs["checkpoints"]), **req.config})
    say = (lambda _m: None) if (req.quiet or req.as_json) else (
        lambda m: err_console.print(f"[dim]{m}[/dim]", highlight=False))
    say(f"run {store.run_id} -> {store.path}")
    golden_files(topology, golden_output)
    executors = None if req.cluster is None else live_workers(req.cluster)
    spec = {"run_id": store.run_id, "topology": topology.model_dump(mode="json", by_alias=True),
            "conf": driverproc.conf(req.master, store.run_id, executors=executors),
            "executors": executors,  # the driver waits for them before its queries start
            "trigger_ms": req.trigger_ms,
            "mutant": req.mutant, "events": str(eng / "driver-events.jsonl"),
            **{k: str(v) for k, v in dirs.items()}}
    spec_path = eng / "spec.json"
    spec_path.write_text(json.dumps(spec))
    state_dir = (Path(".ftctl") / "runs" / store.run_id).resolve()
    watchdog = Watchdog(state_dir, driverproc.DriverGroup)
    driver = driverproc.DriverGroup(state_dir=state_dir)
    feed = Feed(plan, dirs["input"], dirs["control"])
    log = _DriverLog(eng / "driver-events.jsonl")
    t0 = time.monotonic()
    try:
        outcome = _drive(req, store, driver, feed, log, spec_path, say)
        return _verdict(req, store, plan.sinks, dirs["sinks"], outcome, time.monotonic() - t0)
    except KeyboardInterrupt:
        store.mark("incomplete", "interrupted")
        store.event("interrupted")
        err_console.print("[yellow]interrupted[/yellow]: tearing down; run marked incomplete")
        return EXIT_INTERRUPTED
    except _Infra as exc:
        store.mark("failed", str(exc))
        err_console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        return EXIT_INFRA
    finally:
        feed.close()
        driver.down(grace=2.0)
        watchdog.release()
        shutil.rmtree(state_dir, ignore_errors=True)


class _Infra(Exception):
    """The driver could not be started or kept running: exit 3."""


@dataclass
class _Outcome:
    complete: bool
    restarts: int = 0  # of the driver
    rescheduled: int = 0  # lost executors whose work Spark launched again
    detections: int = 0
    undelivered: list[str] = field(default_factory=list)


def _drive(req: EngineRequest, store: RunStore, driver: driverproc.DriverGroup, feed: Feed,
           log: _DriverLog, spec_path: Path, say: Any) -> _Outcome:
    """Start the driver, feed it, strike the faults, restart it until it drains the input."""
    logs = store.path / "logs"
    attempt = 0
    proc = driver.start(spec_path, attempt, logs / "driver-0.log")
    lost = _SchedulerLog()
    lost.follow(logs / "driver-0.log")
    say(f"driver started (spark-submit --master {req.master}); waiting for its queries")
    _await_started(log, proc, attempt)
    store.event("session-started", master=req.master, seconds=round(store.clock(), 3))
    store.event("run-started", instances=[DRIVER])
    store.event("chaos-schedule", name=req.config.get("chaos", {}).get("name", "none"),
                seed=req.config.get("chaos", {}).get("seed", 0),
                faults=[_fault_json(f) for f in req.faults],
                expected_s=req.config.get("chaos", {}).get("expected_s", 0))
    for what in sorted({f.instead_of for f in req.faults if f.instead_of}):
        say(f"{what} carried out as a driver kill: in {req.master} the executors run "
            "inside the driver (give --master of a cluster ftctl started to strike workers)")
    on_workers = [f.planned for f in req.faults if f.planned is not None]
    workers = None
    if on_workers:
        if req.cluster is None:
            raise _Infra("worker faults need the cluster whose workers they strike")
        workers = WorkerFaults(on_workers, req.cluster, ExecutionGraph(req.topology).order,
                               lambda: _app(req, log), store.clock, store.event)
    feed.start()
    if workers is not None:
        workers.start()  # its offsets count from the feed's start, as the others' do
    try:
        out = _run_faults(req, store, driver, feed, log, spec_path, say, proc, lost)
    finally:
        if workers is not None:
            workers.stop()
    if workers is not None:
        out.undelivered += workers.errors
    return out


def _run_faults(req: EngineRequest, store: RunStore, driver: driverproc.DriverGroup,
                feed: Feed, log: _DriverLog, spec_path: Path, say: Any, proc: Any,
                lost: _SchedulerLog) -> _Outcome:
    """The run from the feed's start: strike the engine's own faults, detect, restart."""
    logs = store.path / "logs"
    attempt = 0
    pending = sorted((f for f in req.faults if f.planned is None), key=lambda f: f.at)
    out = _Outcome(complete=False)
    deadline = time.monotonic() + req.timeout
    killed_by_us = False
    last_note = 0.0
    fruitless = batches_then = 0
    deferred: set[int] = set()  # faults told to wait (``fault-deferred`` written once)
    def committed(ev: dict[str, Any]) -> None:
        if ev["kind"] == "batch" and ev["records"]:
            store.history.write("output-committed", sink=ev["sink"], upto=ev["batch"],
                                records=ev["records"])

    log.hook = committed
    rescheduled = _Rescheduled()
    while True:
        log.poll()
        rescheduled.lines(store, out, lost.poll())
        if pending and feed.anchor is not None and time.time() >= feed.anchor + pending[0].at:
            fault = pending[0]
            struck = _strike(req, store, driver, log, fault, out, deferred)
            if struck is not None:
                pending.pop(0)
                killed_by_us = struck or killed_by_us
        code = proc.poll()
        if code is not None:
            log.poll()
            if any(e["kind"] == "finished" and e["attempt"] == attempt for e in log.events):
                out.complete = True
                for f in pending:  # the run ended first: the schedule was not carried out
                    store.event("fault-skipped", type=f.type, reason="the run ended first")
                    out.undelivered.append(f.type)
                return out
            why = next((e.get("error") for e in reversed(log.events)
                        if e["kind"] == "query-failed" and e["attempt"] == attempt), None)
            out.detections += 1
            store.event("failure-detected", instances=[DRIVER],
                        cause="killed" if killed_by_us else "query-failed",
                        reasons=[why or f"driver exited with {code}"])
            killed_by_us = False
            progress = sum(1 for e in log.events if e["kind"] == "batch")
            fruitless = fruitless + 1 if progress == batches_then else 0
            batches_then = progress
            if out.restarts >= MAX_RESTARTS or fruitless >= MAX_FRUITLESS:
                store.event("run-stopped", reason=f"the driver failed {fruitless} times in a "
                            f"row without output: {why or code}")
                return out
            (driver_control(log) / "hold").unlink(missing_ok=True)
            attempt += 1
            out.restarts += 1
            say(f"driver ended ({why or code}); restarting it from its checkpoint location")
            proc = driver.start(spec_path, attempt, logs / f"driver-{attempt}.log")
            lost.follow(logs / f"driver-{attempt}.log")
            _await_started(log, proc, attempt)
            store.event("instance-started", instance=DRIVER, incarnation=attempt,
                        reason="restart", start="job")
        if time.monotonic() > deadline:
            store.event("timeout", seconds=req.timeout)
            return out
        if time.monotonic() - last_note > 2.0 and not req.quiet:
            last_note = time.monotonic()
            say(f"{STRUCTURED}: {store.clock():.0f} s, {feed.written:,} records written, "
                f"{sum(1 for e in log.events if e['kind'] == 'batch')} batches, "
                f"{out.restarts} restarts")
        time.sleep(0.05)


def _fault_json(f: Fault) -> dict[str, Any]:
    data = {k: v for k, v in f.__dict__.items() if k != "planned"}
    if f.planned is not None:
        data["planned"] = f.planned.to_json()
    return data


def _await_started(log: _DriverLog, proc: Any, attempt: int) -> None:
    end = time.monotonic() + START_TIMEOUT
    while time.monotonic() < end:
        log.poll()
        if any(e["kind"] == "started" and e["attempt"] == attempt for e in log.events):
            return
        if proc.poll() is not None:
            raise _Infra(f"the Structured Streaming driver exited with {proc.returncode} "
                         "before its queries started (see logs/driver-*.log in the run)")
        time.sleep(0.1)
    raise _Infra(f"the Structured Streaming driver did not start its queries in "
                 f"{START_TIMEOUT:.0f} s")


def _strike(req: EngineRequest, store: RunStore, driver: driverproc.DriverGroup,
            log: _DriverLog, fault: Fault, out: _Outcome, deferred: set[int]) -> bool | None:
    """Carry out one fault; True when it killed the driver (its exit is ours), None when it
    waits for its target (no task running: none before the first batch, or while the
    driver restarts)."""
    # ``at``: when it struck, on the run's clock (what the recovery report measures
    # from); ``offset``: when the schedule wanted it, seconds into the input.
    ids: dict[str, Any] = {"target": DRIVER, "index": fault.index, "occurrence": 0,
                           "offset": fault.at}
    app = _app(req, log)
    if fault.type in DAMAGE:
        return _damage(req, store, fault, ids, deferred)
    if fault.type in ("kill-executor", "kill-task"):
        # A process of the query's own: an executor JVM (a cluster's), or a Python worker.
        victims = (driverproc.executors(app) if app is not None else []) \
            if fault.type == "kill-executor" else driver.python_workers(app)
        if not victims:
            if fault.index not in deferred:
                deferred.add(fault.index)
                store.event("fault-deferred", type=fault.type, reason="none running yet",
                            at=store.clock(),
                            **{k: v for k, v in ids.items() if k != "target"})
            return None
        target = f"executor of {app}" if fault.type == "kill-executor" else DRIVER
        store.event("fault-injected", type=fault.type, pids=[victims[0].pid],
                    at=store.clock(), **{**ids, "target": target})
        with contextlib.suppress(psutil.Error):  # gone between listing and kill
            victims[0].kill()
        return False
    hold = driver_control(log) / "hold"
    held = None
    if req.kill_point == "commit":
        hold.write_text("hold\n")
        seen = len(log.events)
        end = time.monotonic() + HELD_WAIT
        while held is None and time.monotonic() < end and driver.running():
            log.poll()
            held = next((e["batch"] for e in log.events[seen:] if e["kind"] == "held"), None)
            time.sleep(0.02)
    if not driver.running():
        hold.unlink(missing_ok=True)
        if not any(e["kind"] == "finished" for e in log.events):
            return None  # it failed on its own: the kill waits for the restarted driver
        store.event("fault-skipped", type=fault.type, reason="the driver had drained its input")
        out.undelivered.append(fault.type)
        return False
    store.event("fault-injected", type=fault.type, at=store.clock(),
                pids=[driver.proc.pid] if driver.proc is not None else [],
                details={"kill_point": req.kill_point, "held_batch": held,
                         **({"instead_of": fault.instead_of} if fault.instead_of else {})},
                **ids)
    driver.kill()
    hold.unlink(missing_ok=True)
    return True


def _damage(req: EngineRequest, store: RunStore, fault: Fault, ids: dict[str, Any],
            deferred: set[int]) -> bool | None:
    """A store fault on the checkpoint location of each sink downstream of the target:
    it fails nothing now (it returns False), the driver that next reads the file meets it.
    None (it waits) while no such file is written yet."""
    plan = compile_plan(req.topology)
    sinks = [s for s in plan.sinks if fault.target in plan.upstream(s)] or plan.sinks
    root = store.path.resolve() / "checkpoints"
    struck = [d for d in (damage(root / s, req.checkpoint_file, fault.type, fault.snapshot,
                                 fault.where) for s in sinks) if d is not None]
    if not struck:
        if fault.index not in deferred:
            deferred.add(fault.index)
            store.event("fault-deferred", type=fault.type, at=store.clock(),
                        reason=f"no {req.checkpoint_file} file to damage yet",
                        **{k: v for k, v in ids.items() if k != "target"})
        return None
    store.event("fault-injected", type=fault.type, at=store.clock(), pids=[],
                details={"files": [str(d.path.relative_to(root)) for d in struck],
                         "bytes": [d.size for d in struck], "where": fault.where},
                **{**ids, "target": f"checkpoint location ({req.checkpoint_file})"})
    return False


def _app(req: EngineRequest, log: _DriverLog) -> str | None:
    """The running driver's Spark application id, when its executors are a cluster's."""
    if not req.master.startswith("spark://"):
        return None
    return next((str(e["app"]) for e in reversed(log.events)
                 if e["kind"] == "session" and e.get("app")), None)


def driver_control(log: _DriverLog) -> Path:
    return log.path.parent / "control"


def _verdict(req: EngineRequest, store: RunStore, sinks: list[str], sink_root: Path,
             outcome: _Outcome, seconds: float) -> int:
    topology = req.topology
    outputs = sinkdir.read_outputs(sink_root, sinks)
    store.event("run-finished", complete=outcome.complete, seconds=round(seconds, 3))
    verdict = verify_outputs(topology.sink_modes(), golden_files(topology, golden_output),
                             outputs, Guarantee.EXACTLY_ONCE, store.path / "verify",
                             complete=outcome.complete)
    shutil.rmtree(store.path / "verify", ignore_errors=True)
    store.write_outputs(outputs)
    from ftctl.engines.structured.recovery import series_of, write_recovery

    series = series_of(sink_root, sinks, float(store.meta["created_epoch"]))
    faults = write_recovery(store, series) if req.faults else []
    passed = verdict.passed and not outcome.undelivered
    doc = verdict.to_json()
    doc["oracle"] = None
    doc["passed"] = passed
    store.write_verdict(doc)
    store.mark("complete" if outcome.complete else "incomplete",
               None if outcome.complete else "the run did not finish")
    code = EXIT_OK if passed else EXIT_FAILED
    n_sources = sum(s.hi - s.lo for s in compile_plan(topology).source_instances())
    summary: dict[str, Any] = {
        "run_id": store.run_id, "path": str(store.path), "topology": topology.name,
        "protocol": req.label, "guarantee": Guarantee.EXACTLY_ONCE.value, "exit_code": code,
        "passed": passed, "output_passed": verdict.passed, "complete": outcome.complete,
        "records": n_sources, "records_per_s": round(n_sources / max(seconds, 1e-9), 1),
        "processing_s": round(seconds, 3), "timings": {"total_s": round(seconds, 2)},
        "detections": outcome.detections,
        "restarts": outcome.restarts + outcome.rescheduled,
        "anomalies": verdict.totals(), "oracle": None, "faults": faults}
    req.summary.update(summary)
    if outcome.undelivered:
        summary["failed_because"] = f"{len(outcome.undelivered)} fault(s) not delivered"
    from ftctl.run.execute import show_summary

    show_summary(summary, verdict, None, quiet=req.quiet, as_json=req.as_json,
                 more=lambda _s: _print_faults(faults))
    atomic_write_json(store.path / "summary.json", summary)
    return code


def _print_faults(faults: list[dict[str, Any]]) -> None:
    """The engine's faults in the table protocols print (``recovery per fault``), so no
    label parts from its figure at any width."""
    from rich.table import Table

    from ftctl.run.chaos import RECOVERY_LEGEND
    from ftctl.tables import print_table, seconds_cell

    if not faults:
        return
    table = Table(title="recovery per fault")
    cols = ("fault", "at s", "detect s", "restart s", "first out s", "recover 10% s")
    for col in cols:
        table.add_column(col, justify="left" if col == "fault" else "right")
    for f in faults:
        table.add_row(f["fault"], f"{f['t_fault']:.2f}", *(seconds_cell(f[k]) for k in (
            "detection_s", "restart_s", "first_output_s", "recovery_s")))
    print_table(table, RECOVERY_LEGEND)
