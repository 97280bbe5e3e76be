"""The sink store of a Structured Streaming run: one file per (sink, micro-batch id).

``foreachBatch`` may run a batch again after a failure (the driver died after the write,
before Spark committed the batch): the documented exactly-once pattern is a sink that is
idempotent by batch id, so a batch already written is not written again. The mutant
``ignore-batch-id`` writes every call under a fresh name: a replayed batch duplicates.
"""

from __future__ import annotations

import os
import pickle
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Records = list[tuple[Any, Any]]


@dataclass
class Batch:
    sink: str
    batch: int
    records: Records
    due: list[float]  # when each record's input was written (epoch s): its latency's origin
    written: float  # epoch s

    def latency(self) -> float:
        """Seconds from the earliest input of the batch to its output: the batch's latency."""
        return self.written - min(self.due) if self.due else 0.0


def write_batch(root: Path, sink: str, batch: int, records: Records, due: list[float],
                ignore_batch_id: bool = False) -> bool:
    """Write one micro-batch's output; False when this batch id is already there."""
    folder = root / sink
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{batch:010d}.pkl"
    if ignore_batch_id:
        name = f"{batch:010d}-{secrets.token_hex(4)}.pkl"
    elif (folder / name).exists():
        return False
    blob = pickle.dumps({"batch": batch, "records": records, "due": due,
                         "written": time.time()}, protocol=pickle.HIGHEST_PROTOCOL)
    tmp = folder / f".tmp-{secrets.token_hex(6)}"
    tmp.write_bytes(blob)
    os.replace(tmp, folder / name)  # atomic: a reader sees the whole batch or none of it
    return True


def read_batches(root: Path, sink: str) -> list[Batch]:
    """Every batch file of ``sink``, in batch order (ftctl wrote them: pickle is safe)."""
    folder = root / sink
    if not folder.is_dir():
        return []
    out = []
    for f in sorted(p for p in folder.iterdir() if p.suffix == ".pkl"):
        d = pickle.loads(f.read_bytes())
        out.append(Batch(sink, d["batch"], d["records"], d["due"], d["written"]))
    return out


def read_outputs(root: Path, sinks: list[str]) -> dict[str, Records]:
    """What each sink made visible, batch after batch."""
    return {s: [r for b in read_batches(root, s) for r in b.records] for s in sinks}
