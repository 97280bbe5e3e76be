"""Nexmark at 003's size: each bundled query's fault-free result at 1,000,000 events
(seed 1, default rates) against the digests frozen by the spec's reference script.

    python benchmarks/nexmark_digests.py [--queries q0,q4] [--records 1000000]

Prints per query the digest, the number of keys, whether both match, and the seconds the
simulated golden run took. Exit 1 on any mismatch. Minutes per query at 1M: this is a
benchmark, not a test; tests/test_nexmark_queries.py checks the 5,000-event digests.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path
from typing import Any

from ftctl.config.load import load_topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.golden import golden_output
from ftctl.verify.oracle import final_per_key

ROOT = Path(__file__).resolve().parent.parent / "topologies" / "nexmark"
# sha256 of repr(sorted(result.items())), 16 hex digits, and the number of keys
# (shared spec nexmark.md, section 6; its check script with --full).
FULL = {
    "q0": ("c5bbec864b1f16b6", 1_000_000), "q1": ("5030f1812eb45067", 920_000),
    "q2": ("7ca4d800e6360324", 6908), "q3": ("fedd3a91573952ea", 6080),
    "q4": ("9aef6225ca6892aa", 5), "q5": ("0e4a21274cb4e60b", 54),
    "q6": ("be69e73d71033557", 7560), "q7": ("7195895ffb0e9b7e", 10),
    "q8": ("3086c8953e9d10a9", 56_719),
}


def digest(result: dict[Any, Any]) -> str:
    return hashlib.sha256(repr(sorted(result.items())).encode()).hexdigest()[:16]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", default=",".join(FULL))
    args = parser.parse_args()
    bad = 0
    for q in args.queries.split(","):
        topo = load_topology(ROOT / f"{q}.yaml")
        started = time.perf_counter()
        (records,) = golden_output(ExecutionGraph(topo)).values()
        result = final_per_key(records)
        got = (digest(result), len(result))
        ok = got == FULL[q]
        bad += not ok
        print(f"{q}: digest {got[0]} keys {got[1]} {'match' if ok else 'MISMATCH'} "
              f"({time.perf_counter() - started:.0f} s)", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
