"""The ``source-rewound`` record of a restarted Spark source: from where its task says it
resumes (as its protocol restored it), to the furthest offset seen before the restart.

Under ``none`` the stored blob is a plain offset; the record once said such a source
re-read from its first offset, overstating ``ftctl compare``'s records replayed."""

from __future__ import annotations

import queue
from pathlib import Path
from typing import Any

from ftctl.config.load import load_topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.spark import wire
from ftctl.spark.driver import ControlServer
from ftctl.spark.host import SparkHost
from ftctl.spark.task import InstanceTask, TaskPayload
from protocols.contract.actions import Restart
from protocols.contract.events import Started
from protocols.contract.names import InstanceId
from protocols.none import OFFSET_REF
from protocols.registry import get_protocol

ROOT = Path(__file__).resolve().parent.parent
SOURCE = "lines[0]"


def _graph() -> ExecutionGraph:
    return ExecutionGraph(load_topology(ROOT / "topologies" / "wordcount.yaml"))


def _task(iid: str, started: Started, server: ControlServer, token: bytes) -> InstanceTask:
    return InstanceTask(TaskPayload(
        run_id="r", instance=iid, inc=started.incarnation, protocol="none", params={},
        topology=_graph().topology.model_dump(by_alias=True), started=started,
        coordinator=server.address, token=token))


def test_a_restarted_none_source_reports_the_offset_it_stored() -> None:
    token = wire.new_token()
    server = ControlServer(token, queue.Queue(), wire.HOST, lambda _peer: None)
    tasks = [_task(SOURCE, Started(InstanceId(SOURCE), 1, "restart", 300), server, token),
             _task("count[0]", Started(InstanceId("count[0]"), 1, "restart"), server, token)]
    try:
        assert tasks[0]._hb_extra()["resumed"] == 300
        assert "resumed" not in tasks[1]._hb_extra()  # only sources read from an offset
    finally:
        for t in tasks:
            t._close()
        server.close()


class _Jobs:
    def submit(self, payload: Any) -> bool:
        return False  # no spare took it


def test_the_record_reads_from_the_resume_offset_not_the_first(tmp_path: Path) -> None:
    none = get_protocol("none")
    host = SparkHost(None, _graph(), none, none.resolve({}), "r", tmp_path / "store")
    host.jobs = _Jobs()  # type: ignore[assignment]
    host.offsets[SOURCE] = 800  # the furthest its heartbeats showed before it failed
    host.store.put(OFFSET_REF, SOURCE, 300)  # none's resume offset: a plain int
    host.kernel.pending[SOURCE] = Restart(InstanceId(SOURCE), restore=OFFSET_REF)
    host.inc[SOURCE] = 1

    def rewound() -> list[dict[str, Any]]:
        return [dict(e.data) for e in host.events if e.kind == "source-rewound"]

    assert host._start(SOURCE, 1)
    assert rewound() == []  # where it resumes is the task's to say
    host._check_extra(SOURCE, (SOURCE, 1), {"offset": 340, "resumed": 300})
    host._check_extra(SOURCE, (SOURCE, 1), {"offset": 420, "resumed": 300})
    assert rewound() == [{"from": 300, "to": 800, "records": 500}]
