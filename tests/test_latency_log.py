"""The driver's latency log: compact columns that give back every sample, in order."""

from __future__ import annotations

import threading

from ftctl.spark.latency import LatencyLog


def test_samples_come_back_in_arrival_order_with_their_instance_and_shifted_time() -> None:
    log = LatencyLog()
    log.add("out[0]", [(10.0, 0.5), (10.25, 0.75)])
    log.add("out[1]", [(10.5, 0.125)])
    log.add("out[0]", [(11.0, 1.0)])
    assert len(log) == 4
    assert log.rows(t0=10.0) == [("out[0]", 0.0, 0.5), ("out[0]", 0.25, 0.75),
                                 ("out[1]", 0.5, 0.125), ("out[0]", 1.0, 1.0)]
    # 18 bytes a sample: an instance index and two doubles.
    assert log.which.itemsize + log.t.itemsize + log.v.itemsize == 18


def test_readers_on_several_threads_keep_the_columns_aligned() -> None:
    log = LatencyLog()

    def feed(iid: str, base: float) -> None:
        for k in range(500):
            log.add(iid, [(base + k, base + k), (base + k + 0.5, base + k + 0.5)])

    threads = [threading.Thread(target=feed, args=(f"out[{n}]", 10_000.0 * n))
               for n in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    rows = log.rows()
    assert len(rows) == 4 * 1000
    # Every sample still carries the instance it came from.
    assert all(int(iid[4]) == int(t // 10_000) and t == v for iid, t, v in rows)
