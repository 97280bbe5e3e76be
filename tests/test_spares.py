"""The spare-task pool of ``ftctl.spark.driver.JobRunner``, without a cluster.

A fake SparkContext runs each "job" in the submitting thread: a spare really registers
with a ``ControlServer`` over an authenticated connection and waits for its assignment
(``ftctl.spark.task.wait_for_assignment``); an instance job just reports which instance
it would have run. Spark's part (scheduling, executors) is what the Spark tests cover.
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
)
from ftctl.spark.task import SparePayload, TaskPayload, wait_for_assignment
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
        if isinstance(p, SparePayload):
            if group in self.sc.doomed or self.sc.doom_all:
                raise RuntimeError("Python worker exited unexpectedly (crashed)")
            got = wait_for_assignment(p)
            if group in self.sc.lost_when_assigned and got is not None:
                # The executor dies under the first attempt; Spark runs the task again.
                self.sc.lost_when_assigned.discard(group)
                got = wait_for_assignment(p)
            if got is None:
                return [{"spare": p.spare, "instance": None}]
            if group in self.sc.crash_when_assigned:
                raise RuntimeError("Python worker exited unexpectedly (crashed)")
            p = got
        self.sc.ran.append((group, p.instance, p.inc))
        return [{"instance": p.instance, "inc": p.inc}]


class FakeSC:
    def __init__(self) -> None:
        self.local = threading.local()
        self.ran: list[tuple[str, str, int]] = []
        self.doomed: set[str] = set()
        self.doom_all = False
        self.crash_when_assigned: set[str] = set()
        self.lost_when_assigned: set[str] = set()
        self.cancelled: list[str] = []

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
    server.on_spare = jobs.spare_ready
    try:
        yield sc, jobs, server, token, events
    finally:
        jobs.release_spares()
        assert jobs.wait_all(5.0), "a job thread was left running"
        server.close()


def test_a_restart_goes_to_the_idle_spare_and_a_new_spare_replaces_it(pool: Any) -> None:
    sc, jobs, server, token, events = pool
    jobs.start_spares(server.address, token)
    _until(lambda: len(jobs.idle) == 1)
    assert jobs.submit(_payload("sharder[0]", 1, server, token)) is True
    assert events.get(timeout=10) == (EV_JOB_DONE, "sharder[0]", 1,
                                      {"instance": "sharder[0]", "inc": 1})
    assert sc.ran == [("ftctl-r-spare-0", "sharder[0]", 1)]
    _until(lambda: 1 in jobs.idle)  # the replacement spare is waiting
    jobs.cancel("sharder[0]", 1)  # its job is over: nothing to cancel
    assert sc.cancelled == []


def test_without_an_idle_spare_the_instance_gets_its_own_job(pool: Any) -> None:
    sc, jobs, server, token, events = pool
    assert jobs.submit(_payload("shard[3]", 2, server, token)) is False
    assert events.get(timeout=10)[:3] == (EV_JOB_DONE, "shard[3]", 2)
    assert sc.ran == [("ftctl-r-shard[3]-2", "shard[3]", 2)]


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
    assert jobs.submit(_payload("out[0]", 4, server, token)) is True
    kind, iid, inc, reason = events.get(timeout=10)
    assert (kind, iid, inc) == (EV_JOB_FAILED, "out[0]", 4)
    assert "exited unexpectedly" in reason


def test_a_spare_retried_after_its_executor_died_runs_the_instance_it_was_given(
        pool: Any) -> None:
    sc, jobs, server, token, events = pool
    sc.lost_when_assigned.add("ftctl-r-spare-0")
    jobs.start_spares(server.address, token)
    _until(lambda: 0 in jobs.idle)
    assert jobs.submit(_payload("out[0]", 4, server, token)) is True
    # The retry registers as spare 0 again and is handed out[0] at once, not left idle.
    assert events.get(timeout=10) == (EV_JOB_DONE, "out[0]", 4, {"instance": "out[0]", "inc": 4})
    assert sc.ran == [("ftctl-r-spare-0", "out[0]", 4)]
    assert 0 not in jobs.idle and 0 not in jobs.handed


def test_released_spares_end_their_jobs_without_reporting(pool: Any) -> None:
    _sc, jobs, server, token, events = pool
    jobs.start_spares(server.address, token)
    _until(lambda: len(jobs.idle) == 1)
    jobs.release_spares()
    assert jobs.wait_all(5.0)
    assert events.empty()
    assert jobs.submit(_payload("votes[0]", 1, server, token)) is False
