"""How many frames a Spark task handles before it flushes what they produced.

Up to ``DRAIN_FRAMES`` small frames are handled as one (their sends coalesce, a sink's
deltas fold into one write), but large ones end a drain once they carried
``DRAIN_RECORDS`` records: a wordcount split that drained eight source frames held
64,000 records to encode at once, and spent a third of its CPU in marshal."""

from __future__ import annotations

import threading
from typing import Any

from ftctl.runtime.messages import Batch
from ftctl.spark import task as task_module
from tests.conftest import spark_task


def _drains(lines_per_frame: int, frames: int) -> list[int]:
    """The frames each flush of ``split[0]`` followed, for ``frames`` frames in its inbox."""
    with spark_task("wordcount", "split[0]", "none") as t:
        ch = next(iter(t.core.inputs))
        for f in range(frames):
            records = [(f * lines_per_frame + i, "a b c d e f g h", 0)
                       for i in range(lines_per_frame)]
            items: list[tuple[int, Any]] = [(ch, Batch(records, f + 1))]
            t.inbox.put(("lines[0]", 0, items, 0))
        handled: list[int] = []
        do = t._do

        def counting_do(acts: list[Any]) -> None:
            handled.append(t.core.records_in - sum(handled))
            do(acts)

        t._do = counting_do  # type: ignore[method-assign]
        loop = threading.Thread(target=t._inner_loop)
        loop.start()
        while sum(handled) < frames * lines_per_frame and loop.is_alive():
            loop.join(0.01)
        t.stopping.set()
        loop.join(5)
        assert sum(handled) == frames * lines_per_frame
        return [n // lines_per_frame for n in handled]


def test_small_frames_are_drained_eight_at_a_time() -> None:
    assert _drains(1, 24) == [task_module.DRAIN_FRAMES] * (24 // task_module.DRAIN_FRAMES)


def test_large_frames_end_a_drain_once_they_carried_enough_records() -> None:
    per_frame = task_module.DRAIN_RECORDS // 2
    drains = _drains(per_frame, 12)
    assert drains == [2] * 6
