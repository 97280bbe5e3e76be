"""What a persisted object costs on the Spark host's snapshot store, writer and owner.

Replays the two write patterns that dominate a run: a ``none`` source committing its
offset before every batch (the task appends, the driver adopts it and deletes the
previous one), and a causal sink storing one delta per output (kept until the next local
snapshot). Prints microseconds per object for the task's write, the driver's adoption
and the whole, and the CPU seconds (user and system) of this process.

    python benchmarks/store_writes.py [--objects 4000] [--dir /path/on/the/disk]

Run it on the disk the runs use (the default is a temporary folder there); with
``PYTHONPATH`` set to another checkout it measures that checkout's store.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

from ftctl.store import DirectoryStore


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def pattern(root: Path, objects: int, keep_one: bool, blob: object) -> dict[str, float]:
    owner = DirectoryStore(root)
    task = DirectoryStore.shared(str(root), owner.key())
    assert task is not None
    write = adopt = 0.0
    cpu = _cpu()
    for ref in range(1, objects + 1):
        t0 = time.perf_counter()
        name, size = task.write_pending(ref, "x[0]", blob)
        t1 = time.perf_counter()
        owner.adopt(ref, "x[0]", name, size)
        if keep_one:
            owner.delete(ref - 1, "x[0]")
        adopt += time.perf_counter() - t1
        write += t1 - t0
    cpu = _cpu() - cpu
    assert owner.get(objects, "x[0]") == blob
    return {"write_us": write / objects * 1e6, "adopt_us": adopt / objects * 1e6,
            "cpu_s": cpu}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--objects", type=int, default=4000)
    ap.add_argument("--dir", type=Path, default=None,
                    help="where to make the stores (default: a temporary folder)")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="ftctl-store-", dir=args.dir))
    print(f"{args.objects:,} objects in {base}; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"{'pattern':34} {'write us':>9} {'adopt us':>9} {'total us':>9} {'CPU s':>6}")
    try:
        cases = (("source offset (adopt, delete old)", True, {"offset": 123_456}),
                 ("sink delta, 850 bytes (kept)", False, {"d": "x" * 800}))
        for i, (label, keep_one, blob) in enumerate(cases):
            r = pattern(base / str(i), args.objects, keep_one, blob)
            print(f"{label:34} {r['write_us']:9.1f} {r['adopt_us']:9.1f} "
                  f"{r['write_us'] + r['adopt_us']:9.1f} {r['cpu_s']:6.2f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
