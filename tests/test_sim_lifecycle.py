"""The kernel's lifecycle records on the simulation host: the same kinds and fields the
Spark host writes, on simulated time."""

from __future__ import annotations

import pytest

from ftctl.kernel.commands import Log
from ftctl.kernel.lifecycle import Lifecycle, stopped
from ftctl.sim.faults import Strike
from tests.test_sim_faults import _events, _run

pytestmark = pytest.mark.sim


def test_a_crash_under_checkpoint_writes_stop_restart_running_rewind_and_recovered() -> None:
    _, res = _run("wordcount", "checkpoint", [(0.005, Strike(0, 1, ("count[0]",)))])
    detected = _events(res, "failure-detected")[0]
    stopped = _events(res, "instance-stopped")
    assert stopped and stopped[0].t >= detected.t
    # checkpoint rolls every instance back: the stop names those the coordinator fenced
    fenced = {i for e in stopped for i in e.data["instances"]}
    restarted = {e.instance for e in _events(res, "instance-started")}
    assert restarted <= fenced | set(detected.data["instances"])
    running = [e for e in _events(res, "instance-running") if e.t > detected.t]
    assert running and set(running[0].data["instances"]) <= restarted
    # the run's first group is released too, at t = 0, with every instance
    first = _events(res, "instance-running")[0]
    assert first.t == 0.0 and len(first.data["instances"]) == 6
    recovered = _events(res, "recovered")
    assert len(recovered) == 1
    assert recovered[0].t >= running[-1].t
    assert recovered[0].data["seconds"] == pytest.approx(recovered[0].t - detected.t, abs=1e-6)
    # the restarted source reads again what it had read past its snapshot
    rewound = _events(res, "source-rewound")
    assert [e.instance for e in rewound] == ["lines[0]"]
    data = rewound[0].data
    assert data["to"] >= data["from"] and data["records"] == data["to"] - data["from"] > 0


def test_a_second_crash_during_a_recovery_extends_it() -> None:
    _, res = _run("wordcount", "causal", [(0.005, Strike(0, 1, ("split[0]",))),
                                          (0.0055, Strike(0, 1, ("split[1]",)))])
    detections = _events(res, "failure-detected")
    recovered = _events(res, "recovered")
    assert len(detections) == 2 and recovered
    # counted from the first detection: one recovery, not one per detection
    assert recovered[0].t > detections[1].t
    assert recovered[0].data["seconds"] == pytest.approx(recovered[0].t - detections[0].t,
                                                         abs=1e-6)


def test_the_lifecycle_records_keep_the_fields_the_spark_host_wrote() -> None:
    lc = Lifecycle()
    assert lc.running(["b", "a"]) == Log("instance-running", {"instances": ["a", "b"]})
    assert lc.running(["a"], {"a": "w0"}).data == {"instances": ["a"], "placement": {"a": "w0"}}
    assert lc.settled(1.0, idle=True) == []  # no recovery under way
    assert lc.detected(2.0) == [Log("phase-entered", {"phase": "recovering", "key": 1,
                                                         "by": "kernel"})]
    assert lc.detected(3.0) == []  # during the recovery: it still counts from the first
    assert lc.settled(4.0, idle=False) == []
    assert lc.settled(4.5, idle=True) == [Log("recovered", {"seconds": 2.5}),
                                          Log("phase-left", {"phase": "recovering", "key": 1,
                                                         "by": "kernel"})]
    assert not lc.recovering
    lc.source_restarted("s", 1, 40)
    assert lc.waiting("s", 1)
    assert lc.source_resumed("s", 1, 30) == Log(
        "source-rewound", {"instance": "s", "incarnation": 1, "from": 30, "to": 40,
                           "records": 10})
    assert lc.source_resumed("s", 1, 30) is None and not lc.waiting("s", 1)
    assert stopped(("x", "y")) == Log("instance-stopped", {"instances": ["x", "y"]})
