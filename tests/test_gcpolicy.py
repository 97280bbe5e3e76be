"""The task processes' garbage-collection policy (``ftctl.spark.gcpolicy``)."""

from __future__ import annotations

import gc
import weakref

from ftctl.spark.gcpolicy import ManualGC


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


def test_automatic_collection_is_off_inside_and_restored_after() -> None:
    assert gc.isenabled()
    with ManualGC(every=10.0):
        assert not gc.isenabled()
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_a_disabled_collector_stays_disabled_after() -> None:
    gc.disable()
    try:
        with ManualGC(every=10.0):
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_objects_alive_at_entry_are_frozen_out_of_collections() -> None:
    with ManualGC(every=10.0):
        assert gc.get_freeze_count() > 0


def test_tick_collects_cycles_only_once_due() -> None:
    with ManualGC(every=5.0) as policy:
        node = _Node()
        ref = weakref.ref(node)
        del node
        # Many cycles later the collector has still not run by itself.
        for _ in range(10_000):
            _Node()
        assert ref() is not None
        assert not policy.tick(policy.due - 0.1)
        assert ref() is not None
        assert policy.tick(policy.due)
        assert ref() is None
        assert policy.collections == 1
        assert not policy.tick(policy.due - 0.1)


def test_what_survives_a_collection_is_frozen_out_of_the_next() -> None:
    # A task's log of sent batches must not be traversed again at every collection: at
    # tens of millions of records one collection outlasts the heartbeat timeout.
    with ManualGC(every=5.0) as policy:
        log = [[("k", i, i)] for i in range(10_000)]
        assert any(o is log for o in gc.get_objects())
        before = gc.get_freeze_count()
        assert policy.tick(policy.due)
        assert gc.get_freeze_count() >= before + len(log)
        assert not any(o is log for o in gc.get_objects())
        # what is allocated afterwards is collected as before
        node = _Node()
        ref = weakref.ref(node)
        del node
        assert policy.tick(policy.due)
        assert ref() is None
    assert gc.get_freeze_count() == 0
