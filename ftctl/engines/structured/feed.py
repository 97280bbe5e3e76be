"""The replayable source: ftctl writes each source instance's records as Parquet files in
a folder of its own, paced at the topology's rate, as the run goes.

A file appears whole (written under a dot name Spark ignores, then renamed), and files are
never changed or removed during the run, so a restarted query reads from its committed
offsets exactly what it read before. Each source instance has its own folder, read as a
stream of its own, so each keeps its own event-time watermark until they are unioned.
After the last record every folder gets an end marker (``rows.end_marker``) and the control
folder a ``done`` file, which tells the driver to drain and stop.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from ftctl.engines.structured import rows
from ftctl.engines.structured.plan import Plan, SourceInstance
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.pace import Pace


class Feed:
    def __init__(self, plan: Plan, input_dir: Path, control: Path) -> None:
        self.plan, self.input_dir, self.control = plan, input_dir, control
        self.graph = ExecutionGraph(plan.topology)
        self.pace = Pace.of(plan.topology.input)
        self.batch = max(1, plan.topology.input.batch)
        self.written = 0  # records written so far, every source
        self.anchor: float | None = None
        self.finished = threading.Event()
        self.stop = threading.Event()
        self._thread: threading.Thread | None = None
        for s in plan.source_instances():
            (input_dir / s.dir_name).mkdir(parents=True, exist_ok=True)
        control.mkdir(parents=True, exist_ok=True)

    def start(self) -> None:
        self.anchor = time.time()
        self._thread = threading.Thread(target=self._run, name="feed", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        assert self.anchor is not None
        # One cursor per source instance; each writes a batch once its last record is due.
        cursors = {s.dir_name: s.lo for s in self.plan.source_instances()}
        instances = {s.dir_name: s for s in self.plan.source_instances()}
        gens = {d: self.graph.make_operator(f"{s.op}[{s.index}]") for d, s in instances.items()}
        while cursors and not self.stop.is_set():
            due_next = []
            for d, lo in list(cursors.items()):
                s = instances[d]
                hi = min(s.hi, lo + self.batch)
                due = self._due(s, hi - 1)
                if due > time.time():
                    due_next.append(due)
                    continue
                self._write(s, lo, hi, gens[d])
                if hi >= s.hi:
                    del cursors[d]
                else:
                    cursors[d] = hi
            if due_next and len(due_next) == len(cursors):
                self.stop.wait(max(0.0, min(due_next) - time.time()))
        if self.stop.is_set():
            return
        for s in self.plan.source_instances():
            self._put(s, "end", rows.end_marker(time.time()))
        (self.control / "done").write_text("done\n")
        self.finished.set()

    def _due(self, s: SourceInstance, k: int) -> float:
        assert self.anchor is not None
        return self.anchor + (self.pace.due(k - s.lo) if self.pace is not None else 0.0)

    def _write(self, s: SourceInstance, lo: int, hi: int, gen: object) -> None:
        # The generator takes the instance's range as ``ExecutionGraph.source_range`` gives
        # it, as every host calls it; seq is the record's offset there.
        recs = gen(lo, hi) if callable(gen) else []
        table = rows.table((lo + i, k, v, ts, self._due(s, lo + i))
                           for i, (k, v, ts) in enumerate(recs))
        self._put(s, f"{lo:012d}", table)
        self.written += len(recs)

    def _put(self, s: SourceInstance, name: str, table: object) -> None:
        import pyarrow.parquet as pq

        folder = self.input_dir / s.dir_name
        tmp = folder / f".{name}.tmp"
        pq.write_table(table, tmp)
        os.replace(tmp, folder / f"{name}.parquet")
