"""The slots of ``ftctl.spark.driver.JobRunner``, without a cluster.

A fake SparkContext runs each "job" in its job thread: a slot really runs
``ftctl.spark.task.run_slot``, registering with a ``ControlServer`` over an authenticated
connection and waiting for its assignment; an "instance" records that it ran and lasts
until the test lets it go, as the coordinator's ``EXIT`` would. Spark's part (scheduling,
executors) is what the Spark tests cover.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from ftctl.spark import wire
from ftctl.spark.driver import (
    EV_JOB_DONE,
    EV_JOB_FAILED,
    MAX_SPARE_FAILURES,
    ControlServer,
    JobRunner,
    Slot,
)
from ftctl.spark.task import SparePayload, TaskPayload, run_slot, wait_for_assignment
from protocols.contract.events import Started
from protocols.contract.names import InstanceId


class _Job:
    def __init__(self, sc: FakeSC, payload: Any):
        self.sc, self.payload = sc, payload

    def mapPartitions(self, _fn: Any) -> _Job:
        return self

    def collect(self) -> list[dict[str, Any]]:
        p = self.payload
        group = self.sc.local.group
        self.sc.jobs.append(group)
        assert isinstance(p, SparePayload), "every instance runs in a slot"
        if group in self.sc.doomed or self.sc.doom_all:
            raise RuntimeError("Python worker exited unexpectedly (crashed)")
        # The executor dies under the first attempt; Spark runs the task again.
        if (group in self.sc.lost_when_assigned and p.first is None
                and wait_for_assignment(p) is not None):
            self.sc.lost_when_assigned.discard(group)

        def run(t: TaskPayload) -> dict[str, Any]:
            if group in self.sc.crash_when_assigned:
                raise RuntimeError("Python worker exited unexpectedly (crashed)")
            self.sc.ran.append((group, t.instance, t.inc))
            # The instance runs until the coordinator lets it go (or the run ends).
            done = self.sc.exits.setdefault((t.instance, t.inc), threading.Event())
            while not done.wait(0.01) and not self.sc.over.is_set():
                pass
            return {"instance": t.instance, "inc": t.inc}

        return [run_slot(p, run)]


class FakeSC:
    def __init__(self) -> None:
        self.local = threading.local()
        self.ran: list[tuple[str, str, int]] = []
        self.doomed: set[str] = set()
        self.doom_all = False
        self.crash_when_assigned: set[str] = set()
        self.lost_when_assigned: set[str] = set()
        self.cancelled: list[str] = []
        self.jobs: list[str] = []  # every job submitted, by group
        self.exits: dict[tuple[str, int], threading.Event] = {}
        self.over = threading.Event()  # the run is over: instances end

    def exit(self, iid: str, inc: int) -> None:
        """The coordinator tells that instance to go (``wire.EXIT``)."""
        self.exits.setdefault((iid, inc), threading.Event()).set()

    def setJobGroup(self, group: str, _desc: str, interruptOnCancel: bool) -> None:
        self.local.group = group

    def parallelize(self, items: list[Any], _n: int) -> _Job:
        return _Job(self, items[0])

    def cancelJobGroup(self, group: str) -> None:
        self.cancelled.append(group)


def _payload(iid: str, inc: int, server: ControlServer, token: bytes) -> TaskPayload:
    return TaskPayload(run_id="r", instance=iid, inc=inc, protocol="none", params={},
                       topology={}, started=Started(InstanceId(iid), inc, "restart"),
                       coordinator=server.address,
                       token=token)


def _until(cond: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.fixture
def pool() -> Iterator[tuple[FakeSC, JobRunner, ControlServer, bytes,
                             queue.Queue[tuple[Any, ...]]]]:
    token = wire.new_token()
    events: queue.Queue[tuple[Any, ...]] = queue.Queue()
    server = ControlServer(token, events)
    sc = FakeSC()
    jobs = JobRunner(sc, "r", events, spares=1)
    jobs.connect_to(server.address, token)
    server.on_spare = jobs.spare_ready
    try:
        yield sc, jobs, server, token, events
    finally:
        sc.over.set()
        jobs.release_spares()
        assert jobs.wait_all(15.0), "a job thread was left running"
        server.close()


def test_a_restart_goes_to_the_idle_spare_and_a_new_spare_replaces_it(pool: Any) -> None:
    sc, jobs, server, token, _events = pool
    jobs.start_spares(server.address, token)
    _until(lambda: len(jobs.idle) == 1)
    assert jobs.submit(_payload("sharder[0]", 1, server, token)) == "slot"
    _until(lambda: ("ftctl-r-spare-0", "sharder[0]", 1) in sc.ran)
    _until(lambda: 1 in jobs.idle)  # the replacement spare is waiting
    assert jobs.where("sharder[0]", 1).sid == 0
    jobs.cancel("sharder[0]", 1)
    assert sc.cancelled == ["ftctl-r-spare-0"]  # a lingering instance: its slot's job


def test_without_a_waiting_slot_the_instance_gets_a_slot_job_of_its_own(pool: Any) -> None:
    sc, jobs, server, token, events = pool
    assert jobs.submit(_payload("shard[3]", 2, server, token)) == "job"
    _until(lambda: sc.ran == [("ftctl-r-spare-0", "shard[3]", 2)])
    # Let go at the end of the run: its job reports the instance it hosted.
    sc.over.set()
    jobs.release_spares()
    assert events.get(timeout=10)[:3] == (EV_JOB_DONE, "shard[3]", 2)


def _one_running(pool: Any) -> tuple[FakeSC, JobRunner, ControlServer, bytes]:
    """count[0] #0 running in a slot job of its own, with no empty slots kept."""
    sc, jobs, server, token, _events = pool
    jobs.spares = 0
    assert jobs.submit(_payload("count[0]", 0, server, token)) == "job"
    _until(lambda: len(sc.ran) == 1)
    return sc, jobs, server, token


def test_a_fenced_instance_hands_its_slot_to_the_next_start(pool: Any) -> None:
    sc, jobs, server, token = _one_running(pool)
    jobs.released("count[0]", 0, alive=True)
    sc.exit("count[0]", 0)
    _until(lambda: 0 in jobs.idle)
    jobs.cancel("count[0]", 0)  # CANCEL_AFTER fires late: the slot hosts others now
    assert sc.cancelled == []
    assert jobs.submit(_payload("count[0]", 1, server, token)) == "slot"
    _until(lambda: len(sc.ran) == 2)
    assert sc.ran[1] == ("ftctl-r-spare-0", "count[0]", 1)
    assert sc.jobs == ["ftctl-r-spare-0"]  # one Spark job for both incarnations


def test_a_rollback_of_survivors_waits_for_their_slots_not_for_new_jobs(pool: Any) -> None:
    """A global rollback fences the survivors and restarts everything in one plan: the
    restarts are queued for the survivors' slots, which come back in milliseconds."""
    sc, jobs, server, token, events = pool
    jobs.spares = 0
    names = ["lines[0]", "count[0]", "count[1]"]
    for iid in names:
        assert jobs.submit(_payload(iid, 0, server, token)) == "job"
    _until(lambda: len(sc.ran) == 3)
    for iid in names:  # all fenced alive, and restarted before any slot is back
        jobs.released(iid, 0, alive=True)
    assert [jobs.submit(_payload(iid, 1, server, token)) for iid in names] == ["queued"] * 3
    for iid in names:
        sc.exit(iid, 0)
    _until(lambda: len(sc.ran) == 6)
    assert {(iid, inc) for _, iid, inc in sc.ran[3:]} == {(i, 1) for i in names}
    assert len(sc.jobs) == 3  # no Spark job launched for the restarts
    assert events.empty()


def test_a_failed_instances_slot_is_not_waited_for(pool: Any) -> None:
    _sc, jobs, server, token = _one_running(pool)
    jobs.released("count[0]", 0, alive=False)
    assert jobs.submit(_payload("count[0]", 1, server, token)) == "job"


def test_a_slot_that_does_not_come_back_in_time_gets_its_start_a_job(
        pool: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ftctl.spark.driver.RETURN_WAIT", 0.5)
    sc, jobs, server, token = _one_running(pool)
    jobs.released("count[0]", 0, alive=True)  # but it never exits (paused, say)
    assert jobs.submit(_payload("count[0]", 1, server, token)) == "queued"
    _until(lambda: ("ftctl-r-spare-1", "count[0]", 1) in sc.ran, timeout=5.0)


def test_waiting_slots_are_picked_for_failure_domain_anti_affinity() -> None:
    from multiprocessing import Pipe

    jobs = JobRunner(None, "r", queue.Queue(), spares=0)
    (a, _a), (b, _b) = Pipe(), Pipe()
    racks = {"e0": "rack=a", "e1": "rack=a", "e2": "rack=b"}
    jobs.domain = lambda s: racks.get(s.executor or "")
    jobs.slots = {
        0: Slot(0, "busy", key=("count[0]", 0), executor="e0"),
        1: Slot(1, "busy", key=("lines[0]", 0), executor="e2"),
        2: Slot(2, "idle", conn=a, executor="e1"),
        3: Slot(3, "idle", conn=b, executor="e2"),
    }
    # count[1] away from rack a, where count[0] runs, even onto a busier executor.
    assert jobs._pick("count[1]").sid == 3  # type: ignore[union-attr]
    # lines[1] away from lines[0]'s rack b.
    assert jobs._pick("lines[1]").sid == 2  # type: ignore[union-attr]
    # A preferred executor (a replica group's placement) comes first.
    jobs.locations = {"lines[1]": "executor_127.0.0.1_e2"}
    assert jobs._pick("lines[1]").sid == 3  # type: ignore[union-attr]


def test_a_spare_lost_while_idle_is_replaced_silently(pool: Any) -> None:
    sc, jobs, server, token, events = pool
    sc.doomed.add("ftctl-r-spare-0")
    jobs.start_spares(server.address, token)
    _until(lambda: 1 in jobs.idle)
    assert events.empty()  # no instance depended on it: nothing for the host to judge


def test_spares_that_never_come_up_are_not_resubmitted_forever(pool: Any) -> None:
    sc, jobs, server, token, events = pool
    sc.doom_all = True
    jobs.start_spares(server.address, token)
    _until(lambda: jobs.next_spare == 1 + MAX_SPARE_FAILURES and not jobs.threads)
    time.sleep(0.2)
    assert jobs.next_spare == 1 + MAX_SPARE_FAILURES and not jobs.threads
    assert events.empty()


def test_a_spare_that_fails_once_assigned_is_that_instance_failing(pool: Any) -> None:
    sc, jobs, server, token, events = pool
    sc.crash_when_assigned.add("ftctl-r-spare-0")
    jobs.start_spares(server.address, token)
    _until(lambda: 0 in jobs.idle)
    assert jobs.submit(_payload("out[0]", 4, server, token)) == "slot"
    kind, iid, inc, reason = events.get(timeout=10)
    assert (kind, iid, inc) == (EV_JOB_FAILED, "out[0]", 4)
    assert "exited unexpectedly" in reason


def test_a_spare_retried_after_its_executor_died_runs_the_instance_it_was_given(
        pool: Any) -> None:
    sc, jobs, server, token, _events = pool
    sc.lost_when_assigned.add("ftctl-r-spare-0")
    jobs.start_spares(server.address, token)
    _until(lambda: 0 in jobs.idle)
    assert jobs.submit(_payload("out[0]", 4, server, token)) == "slot"
    # The retry registers as slot 0 again and is handed out[0] at once, not left idle.
    _until(lambda: sc.ran == [("ftctl-r-spare-0", "out[0]", 4)])
    assert 0 not in jobs.idle and jobs.where("out[0]", 4) is not None


def test_released_spares_end_their_jobs_without_reporting(pool: Any) -> None:
    _sc, jobs, server, token, events = pool
    jobs.start_spares(server.address, token)
    _until(lambda: len(jobs.idle) == 1)
    jobs.release_spares()
    assert jobs.wait_all(5.0)
    assert events.empty()


def test_a_returning_workers_executor_gets_warm_slots_and_says_so(
        pool: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    sc, jobs, _server, _token, _events = pool
    jobs.spares = 0
    pinned: list[str] = []

    def pin(_sc: Any, payload: Any, where: str) -> _Job:
        pinned.append(where)
        return _Job(sc, payload)

    jobs.pin = pin
    ready: list[str] = []
    jobs.on_ready = ready.append
    monkeypatch.setattr("ftctl.spark.task.where_this_runs", lambda: ("7", "127.0.0.1:7007"))
    old = ["executor_127.0.0.1_1", "executor_127.0.0.1_2"]
    jobs.slots = {0: Slot(0, "busy", key=("a[0]", 0), executor="1"),
                  1: Slot(1, "busy", key=("a[1]", 0), where=old[1])}
    executors = list(old)
    jobs.executors = lambda: executors
    jobs.warm(2, 1)
    time.sleep(0.5)
    assert pinned == []  # the returning worker's executor is not up yet
    executors.append("executor_127.0.0.1_7")
    _until(lambda: ready == ["127.0.0.1:7007"] * 2)
    assert pinned == ["executor_127.0.0.1_7"] * 2
    assert len(jobs.idle) == 2



def test_a_start_waits_for_an_empty_slot_already_on_its_way(pool: Any) -> None:
    """An empty slot being launched (a refill, a returning worker's warm-up) takes the next
    start: launching another job would cost as much and hold one more core."""
    sc, jobs, server, token, _events = pool
    gate = threading.Event()
    jobs.pin = lambda _sc, payload, _where: _Job(sc, payload) if gate.wait(10) else None
    jobs.executors = lambda: ["executor_h_1"]
    jobs.start_spares(server.address, token)  # one empty slot, held up in its launch
    assert jobs.submit(_payload("out[0]", 1, server, token)) == "queued"
    gate.set()
    _until(lambda: sc.ran == [("ftctl-r-spare-0", "out[0]", 1)])
    assert sc.jobs[0] == "ftctl-r-spare-0"


def test_a_slot_whose_process_died_or_whose_worker_is_gone_is_not_picked() -> None:
    from multiprocessing import Pipe

    jobs = JobRunner(None, "r", queue.Queue(), spares=0)
    dead, dead_end = Pipe()
    dead_end.close()  # its process died: the connection reads EOF
    live, _live_end = Pipe()
    gone, _gone_end = Pipe()
    jobs.slots = {0: Slot(0, "idle", conn=dead, executor="1", worker="h:1"),
                  1: Slot(1, "idle", conn=gone, executor="2", worker="h:2"),
                  2: Slot(2, "idle", conn=live, executor="3", worker="h:3")}
    jobs.workers_gone({"h:2"})
    assert jobs._pick("count[0]").sid == 2  # type: ignore[union-attr]
    assert jobs.slots[0].state == "lost" and jobs.slots[1].state == "lost"
    jobs.slots[2].state = "busy"
    assert jobs._pick("count[1]") is None


def test_a_gone_worker_names_the_starts_handed_to_its_slots() -> None:
    """A start handed to a slot on a worker the master has just seen go never registers:
    the runner names it, so the host fails it at once instead of after REGISTER_TIMEOUT."""
    from multiprocessing import Pipe

    jobs = JobRunner(None, "r", queue.Queue(), spares=0)
    waiting, _end = Pipe()
    jobs.slots = {0: Slot(0, "busy", key=("tags[1]", 2), worker="h:1"),
                  1: Slot(1, "busy", key=("out[0]", 2), worker="h:2"),
                  2: Slot(2, "idle", conn=waiting, worker="h:1"),
                  3: Slot(3, "launching", worker="h:1")}
    assert jobs.workers_gone({"h:1"}) == [("tags[1]", 2)]
    assert jobs.slots[2].state == "lost" and jobs.slots[1].state == "busy"
    assert jobs.workers_gone(set()) == []


def test_a_start_queued_for_a_slot_on_a_gone_worker_does_not_wait_for_it(pool: Any) -> None:
    """A survivor fenced alive on a worker that then goes: its slot will not come back, so
    the start queued for it launches a slot job at once instead of after RETURN_WAIT."""
    sc, jobs, server, token, _events = pool
    jobs.connect_to(server.address, token)
    jobs.slots = {0: Slot(0, "returning", worker="h:1", since=time.monotonic())}
    jobs.next_spare = 1
    assert jobs.submit(_payload("count[0]", 1, server, token)) == "queued"
    assert sc.jobs == []  # waits for the slot coming back
    jobs.workers_gone({"h:1"})
    assert jobs.slots[0].state == "lost"
    _until(lambda: sc.ran == [("ftctl-r-spare-1", "count[0]", 1)])


def test_with_start_job_every_start_is_a_job_and_no_slot_comes_back(pool: Any) -> None:
    sc, _jobs, server, token, _events = pool
    jobs = JobRunner(sc, "r", queue.Queue(), spares=0, recycle=False)
    jobs.connect_to(server.address, token)
    server.on_spare = jobs.spare_ready
    assert jobs.submit(_payload("count[0]", 0, server, token)) == "job"
    _until(lambda: len(sc.ran) == 1)
    jobs.released("count[0]", 0, alive=True)
    assert jobs.submit(_payload("count[0]", 1, server, token)) == "job"  # not queued
    sc.exit("count[0]", 0)
    _until(lambda: len(sc.ran) == 2)
    assert jobs.wait_all(0.5) is False  # count[0] #1 still runs
    time.sleep(0.1)
    assert jobs.idle == {} and len(sc.jobs) == 2  # the first slot ended with its instance
    sc.over.set()
    jobs.release_spares()
    assert jobs.wait_all(5.0)


def test_a_returning_slot_is_not_cancelled_within_its_grace_and_failed_domains_wait(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from multiprocessing import Pipe

    monkeypatch.setattr("ftctl.spark.driver.RETURN_GRACE", 0.3)
    cancelled: list[str] = []

    class SC:
        def cancelJobGroup(self, group: str) -> None:
            cancelled.append(group)

    jobs = JobRunner(SC(), "r", queue.Queue(), spares=0)
    jobs.domain = lambda s: {"1": "rack=a", "2": "rack=a", "3": "rack=b"}.get(s.executor or "")
    jobs.slots = {0: Slot(0, "busy", key=("a[0]", 0), executor="1"),
                  1: Slot(1, "busy", key=("b[0]", 0), executor="3")}
    jobs.group_of = {("a[0]", 0): "ftctl-r-spare-0", ("b[0]", 0): "ftctl-r-spare-1"}
    jobs.threads = {"ftctl-r-spare-0": threading.current_thread(),
                    "ftctl-r-spare-1": threading.current_thread()}
    jobs.released("a[0]", 0, alive=True)  # fenced alive: coming back, maybe slowly
    jobs.cancel("a[0]", 0)
    assert cancelled == []
    _until(lambda: cancelled == ["ftctl-r-spare-0"], timeout=5.0)  # the grace is over
    # b[0] failed on rack b: a restart prefers rack a's waiting slot, though b is emptier.
    jobs.released("b[0]", 0, alive=False)
    (x, _x), (y, _y) = Pipe(), Pipe()
    jobs.slots.update({2: Slot(2, "idle", conn=x, executor="2"),
                       3: Slot(3, "idle", conn=y, executor="3")})
    assert jobs._pick("c[0]").sid == 2  # type: ignore[union-attr]



def test_a_worker_that_joined_after_its_domains_failure_takes_restarts_first() -> None:
    """Capacity coming back: a returned worker's slot is not shunned for its domain's
    recent failure (the survivors of that domain still are), and it runs nothing yet."""
    from multiprocessing import Pipe

    jobs = JobRunner(None, "r", queue.Queue(), spares=0)
    racks = {"1": "rack=a", "2": "rack=b", "3": "rack=b", "4": "rack=b"}
    jobs.domain = lambda s: racks.get(s.executor or "")
    jobs.slots = {0: Slot(0, "busy", key=("b[0]", 0), executor="2", worker="w1"),
                  1: Slot(1, "busy", key=("a[0]", 0), executor="1", worker="w0")}
    jobs.joined = {"w0": 0.0, "w1": 0.0, "w2": 0.0}
    jobs.released("b[0]", 0, alive=False)  # rack b failed just now
    (x, _x), (y, _y), (z, _z) = Pipe(), Pipe(), Pipe()
    jobs.slots.update({2: Slot(2, "idle", conn=x, executor="1", worker="w0"),
                       3: Slot(3, "idle", conn=y, executor="3", worker="w2")})
    # rack b's survivor w2 is shunned though emptier: rack a's busier slot is picked.
    assert jobs._pick("c[0]").sid == 2  # type: ignore[union-attr]
    # w3 joined rack b after the failure: its slot, on an empty executor, is picked.
    jobs.joined["w3"] = time.monotonic() + 0.001
    jobs.slots[4] = Slot(4, "idle", conn=z, executor="4", worker="w3")
    assert jobs._pick("c[0]").sid == 4  # type: ignore[union-attr]
