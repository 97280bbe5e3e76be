"""What a global rollback's discard costs the driver on the Spark host's directory store.

    python benchmarks/rollback_discard.py [--snapshots 60] [--instances 6,23] [--repeat 5]

A store holds ``--snapshots`` complete snapshots of every instance (checkpoint keeps all
of them: a minute of a run at its 1 s cluster interval) plus two partial ones, and a
rollback discards what lies after the last complete one, either instance by instance
(``DiscardSnapshots(i, after=k)`` for each, a listing of the store each) or at once
(``DiscardSnapshots(after=k)``: one listing, then the newer folders emptied). Prints the
median wall time of each.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable

from ftctl.store import DirectoryStore


def _filled(root: str, snapshots: int, instances: list[str]) -> DirectoryStore:
    store = DirectoryStore(root)
    for sid in range(1, snapshots + 3):
        for i in instances:
            store.put(sid, i, {"id": sid, "core": {"op": {}, "offset": sid}})
    return store


def per_instance(store: DirectoryStore, instances: list[str], after: int) -> None:
    for i in instances:  # what the kernel did for DiscardSnapshots(i, after) per instance
        for ref in store.snapshots_of(i):
            if ref > after:
                store.delete(ref, i)


def at_once(store: DirectoryStore, instances: list[str], after: int) -> None:
    store.discard_after(after)


def measure(how: Callable[[DirectoryStore, list[str], int], None], snapshots: int,
            n: int, repeat: int) -> float:
    instances = [f"op{k % 4}[{k}]" for k in range(n)]
    times = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as root:
            store = _filled(root, snapshots, instances)
            t0 = time.perf_counter()
            how(store, instances, snapshots)
            times.append(time.perf_counter() - t0)
            assert all(store.snapshots_of(i)[-1] == snapshots for i in instances)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--snapshots", type=int, default=60)
    ap.add_argument("--instances", default="6,23")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    for n in (int(x) for x in args.instances.split(",")):
        each = measure(per_instance, args.snapshots, n, args.repeat)
        once = measure(at_once, args.snapshots, n, args.repeat)
        print(f"{n:3d} instances, {args.snapshots} snapshots: per instance "
              f"{each * 1000:7.2f} ms, at once {once * 1000:7.2f} ms ({each / once:.1f}x)")


if __name__ == "__main__":
    main()
