"""What a causal local snapshot pays for its payload log: encoding the whole log again,
as every snapshot once did, against ``PayloadLog.pack`` (``protocols/shared/payload_log.py``),
which encodes each batch once.

A log of ``--batches`` batches, shaped like a shard's log to the sink on
``topologies/sharder.yaml`` (5 records a batch, a three-level clock in ``meta``), then
``--snapshots`` snapshots with ``--between`` batches sent before each and, every
``--trim-every`` snapshots, the log trimmed by as many batches as came since the last
trim (the child's own snapshot covering them), so it stays near its size. Prints the
microseconds per snapshot each way, the bytes each stores, and that both store the same
batches.

    python benchmarks/snapshot_payload_log.py [--batches 500] [--snapshots 2000]
        [--between 10] [--trim-every 20]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ftctl.codec import decode, encode_blob
from ftctl.runtime.messages import Batch
from protocols.shared.payload_log import PayloadLog


def _batch(t: int) -> Batch:
    meta = ("shard[3]", t, (("sharder[0]", t, (("votes[0]", t, ()),)),))
    return Batch([(k * 7 + t % 13, 1, 110_000 + 5 * t + k) for k in range(5)], t, None, meta)


def run(batches: int, snapshots: int, between: int, trim_every: int, packed: bool
        ) -> dict[str, Any]:
    log, t, last_trim = PayloadLog(), 0, 0
    for _ in range(batches):
        t += 1
        log.append(t, _batch(t))
    spent, stored, blob = 0.0, 0, b""
    for i in range(1, snapshots + 1):
        for _ in range(between):
            t += 1
            log.append(t, _batch(t))
        if i % trim_every == 0:
            log.trim(last_trim + between * trim_every)
            last_trim += between * trim_every
        start = time.perf_counter()
        if packed:
            blob = encode_blob({"plog": {24: log.pack()}})
        else:
            blob = encode_blob({"plog": {24: [(b.records, b.seq, b.watermark, b.meta)
                                              for b in log]}})
        spent += time.perf_counter() - start
        stored += len(blob)
    last = decode(blob)["plog"][24]
    batches_kept = PayloadLog.unpack(last) if packed else last
    return {"us": 1e6 * spent / snapshots, "bytes": stored / snapshots,
            "kept": [(list(r), s, w, m) for r, s, w, m in batches_kept]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=500)
    ap.add_argument("--snapshots", type=int, default=2000)
    ap.add_argument("--between", type=int, default=10)
    ap.add_argument("--trim-every", type=int, default=20)
    a = ap.parse_args()
    whole = run(a.batches, a.snapshots, a.between, a.trim_every, packed=False)
    packed = run(a.batches, a.snapshots, a.between, a.trim_every, packed=True)
    if whole["kept"] != packed["kept"]:
        sys.exit("the packed snapshot does not hold the batches the whole one does")
    print(f"{a.snapshots} snapshots of a {a.batches}-batch log, {a.between} batches "
          f"between, trimmed every {a.trim_every}; load average {os.getloadavg()[0]:.2f}")
    print(f"{'':24} {'us/snapshot':>12} {'bytes/snapshot':>15}")
    for name, r in (("encoded whole", whole), ("pack (encoded once)", packed)):
        print(f"{name:24} {r['us']:12.1f} {r['bytes']:15,.0f}")
    print(f"ratio: {whole['us'] / packed['us']:.1f}x; both hold the same "
          f"{len(packed['kept'])} batches")


if __name__ == "__main__":
    main()
