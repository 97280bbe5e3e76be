"""Peak memory and time of the out-of-core verdict (``ftctl/verify/outofcore.py``) as the
output grows.

For each shape and size, a golden output of N records and a run's output (golden with a
record lost every ~1M and one repeated every ~1M) are written as Parquet sink files,
then judged in a fresh process. Shapes, after the bundled topologies' sinks, both
``ordered-per-key`` with a running count per key:

- ``wordcount``: key a word of a 50,000-word Zipf vocabulary (``wcN`` strings);
- ``sharder``: key one of 2,000 articles (ints, Zipf 1.1), as ``topologies/sharder.yaml``.

Per run, the verifying process's peak RSS (``ru_maxrss``), the peak of its temp space
(DuckDB's spill and the verdict's intermediate files, sampled every second) and wall
time, and the time to write both files (in a process of its own). The data goes to ``--dir``
(default a temp dir; 10-13 bytes a record a side, measured at 1M, plus
DuckDB's spill) and is removed after each size.

    python benchmarks/verify_memory.py [--sizes 1000000,10000000] [--in-memory] [--allow-100m]
        [--memory-limit 512MB] [--before CHECKOUT] [--files FOLDER]

``--files FOLDER`` judges ``FOLDER/golden.parquet`` against ``FOLDER/output.parquet``
instead (a run's sink files, kept). ``--in-memory`` also judges each pair with
``checker.compare`` over lists read from the same files (how the driver judged before),
for comparison. ``--before`` judges the same files
with another checkout's ftctl first (a before/after on one machine); ``--memory-limit``
is DuckDB's (a lower one splits the counts into more parts, as a larger input would).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHAPES = {"wordcount": (50_000, 1.2), "sharder": (2_000, 1.1)}  # keys, Zipf exponent
CHUNK = 1_000_000
LOSE, REPEAT = 1_000_003, 999_983  # a record lost / repeated at these strides


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def records(shape: str, n: int) -> Iterator[list[tuple[Any, int]]]:
    """Golden's records in chunks: (key, running count of the key)."""
    import numpy as np

    keys, skew = SHAPES[shape]
    rng = np.random.default_rng(7)
    counts: dict[Any, int] = {}
    done = 0
    while done < n:
        draw = (rng.zipf(skew, size=min(CHUNK, n - done)) - 1) % keys
        names: list[Any] = ([f"wc{k}" for k in draw.tolist()] if shape == "wordcount"
                            else draw.tolist())
        chunk = []
        for k in names:
            c = counts.get(k, 0) + 1
            counts[k] = c
            chunk.append((k, c))
        done += len(chunk)
        yield chunk


def build(shape: str, n: int, folder: Path) -> dict[str, float]:
    from ftctl.verify.sinkfile import SinkWriter

    t = time.monotonic()
    golden, output = SinkWriter(folder / "golden.parquet"), SinkWriter(folder / "output.parquet")
    seq = 0
    for chunk in records(shape, n):
        golden.write(chunk)
        out = []
        for rec in chunk:
            if seq % LOSE != LOSE // 2:
                out.append(rec)
            if seq % REPEAT == REPEAT // 3:
                out.append(rec)
            seq += 1
        output.write(out)
    golden.close()
    output.close()
    return {"write_s": time.monotonic() - t, "write_peak_mb": _peak_mb()}


TEMP_EVERY = 1.0  # seconds between two samples of the verdict's temp space


class TempSpace:
    """The largest size of the files under ``folder`` seen while the context runs,
    sampled every ``TEMP_EVERY`` seconds on a thread: DuckDB's spill and the verdict's
    intermediate files (``outofcore.connect``), which live there until it ends."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.peak = folder, 0
        self.samples = 0  # taken so far
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _size(self) -> int:
        total = 0
        # A file or folder removed while it is walked: what was counted so far.
        with contextlib.suppress(OSError):
            for path in self.folder.rglob("*"):
                with contextlib.suppress(OSError):
                    total += path.stat().st_size if path.is_file() else 0
        return total

    def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, self._size())
            self.samples += 1
            if self._done.wait(TEMP_EVERY):
                return

    def __enter__(self) -> TempSpace:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


def judge(folder: Path) -> dict[str, Any]:
    from ftctl.verify.outofcore import verify_files
    from protocols.contract.spec import Guarantee

    t = time.monotonic()
    with TempSpace(folder / "duckdb") as temp:
        verdict = verify_files({"out": "ordered-per-key"}, {"out": folder / "golden.parquet"},
                               {"out": folder / "output.parquet"}, Guarantee.EXACTLY_ONCE,
                               temp=folder / "duckdb",
                               memory_limit=os.environ.get("VERIFY_MEMORY_LIMIT", "512MB"))
    (sink,) = verdict.sinks
    return {"verify_s": time.monotonic() - t, "verify_peak_mb": _peak_mb(),
            "temp_peak_gb": temp.peak / 1e9,
            "anomalies": sink.anomalies(), "divergences": len(sink.divergences)}


def judge_in_memory(folder: Path) -> dict[str, Any]:
    """The same verdict by ``checker.compare``, both outputs read into lists: the old way."""
    import pyarrow.parquet as pq

    from ftctl.verify.checker import compare
    from ftctl.verify.sinkfile import original

    t = time.monotonic()
    sides = []
    for name in ("golden", "output"):
        recs: list[tuple[Any, Any]] = []
        for batch in pq.ParquetFile(folder / f"{name}.parquet").iter_batches():
            cols = [batch.column(c).to_pylist() for c in ("k", "v", "ko", "vo")]
            recs.extend((original(k, ko), original(v, vo))
                        for k, v, ko, vo in zip(*cols, strict=True))
        sides.append(recs)
    sink = compare("out", "ordered-per-key", sides[0], sides[1])
    return {"verify_s": time.monotonic() - t, "verify_peak_mb": _peak_mb(),
            "anomalies": sink.anomalies(), "divergences": len(sink.divergences)}


def _child(*args: str, root: Path = ROOT, limit: str = "512MB") -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(root), "VERIFY_MEMORY_LIMIT": limit}
    out = subprocess.run([sys.executable, __file__, *args], check=True, env=env,
                         capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


def _sizes(text: str) -> list[int]:
    """``--sizes``: record counts, comma-separated (argparse reports a bad one, exit 2)."""
    try:
        sizes = [int(s) for s in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of record counts: {text!r}") from None
    if min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"record counts must be positive: {text!r}")
    return sizes


def _shapes(text: str) -> list[str]:
    unknown = sorted(set(text.split(",")) - SHAPES.keys())
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown shape {unknown[0]!r} (known: {', '.join(SHAPES)})")
    return text.split(",")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=_sizes, default=[1_000_000, 10_000_000])
    ap.add_argument("--shapes", type=_shapes, default=list(SHAPES))
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--allow-100m", action="store_true",
                    help="allow sizes above 10M (100M takes about 6 GB of disk and an hour)")
    ap.add_argument("--in-memory", action="store_true",
                    help="also judge with the in-memory checker, for comparison")
    ap.add_argument("--memory-limit", default="512MB", help="DuckDB's (default 512MB)")
    ap.add_argument("--before", type=Path, default=None,
                    help="also judge with this checkout's ftctl, first (a before/after)")
    ap.add_argument("--files", type=Path, default=None, metavar="FOLDER",
                    help="judge FOLDER/golden.parquet against FOLDER/output.parquet (sink "
                         "files kept from a run, say) instead of building files")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)  # build|judge shape/n folder
    args = ap.parse_args()
    if args.child:
        what, spec, folder = args.child
        shape, n = spec.split("/")
        step = {"build": lambda f: build(shape, int(n), f), "judge": judge,
                "memory": judge_in_memory}[what]
        res = step(Path(folder))
        print(json.dumps(res))
        return
    if args.files is not None:
        print(f"load {os.getloadavg()[0]:.2f} at start; DuckDB memory limit {args.memory_limit}")
        judges = [(ROOT, "")] if args.before is None else [(args.before.resolve(), " (before)"),
                                                          (ROOT, "")]
        for root, tag in judges:
            res = _child("--child", "judge", "files/0", str(args.files.resolve()), root=root,
                         limit=args.memory_limit)
            print(f"{args.files}{tag}: verify {res['verify_s']:.1f} s, peak "
                  f"{res['verify_peak_mb']:,.0f} MB, temp space peak "
                  f"{res['temp_peak_gb']:.2f} GB, {res['anomalies']}", flush=True)
        print(f"load {os.getloadavg()[0]:.2f} at end")
        return
    sizes = args.sizes
    if max(sizes) > 10_000_000 and not args.allow_100m:
        ap.error("sizes above 10M need --allow-100m")
    if args.dir is not None:
        Path(args.dir).mkdir(parents=True, exist_ok=True)
    print(f"load {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} at start, "
          f"{os.cpu_count()} CPUs")
    print(f"DuckDB memory limit {args.memory_limit}")
    print(f"{'shape':<18} {'records':>12} {'write s':>8} {'verify s':>9} "
          f"{'verify peak MB':>15} {'temp GB':>8} anomalies")
    for shape in args.shapes:
        for n in sizes:
            folder = Path(tempfile.mkdtemp(prefix="ftctl-verify-", dir=args.dir))
            try:
                built = _child("--child", "build", f"{shape}/{n}", str(folder))
                runs = [("judge", ROOT, "")]
                if args.before is not None:
                    runs.insert(0, ("judge", args.before.resolve(), " (before)"))
                if args.in_memory:
                    runs.append(("memory", ROOT, " (lists)"))
                for what, root, tag in runs:
                    res = _child("--child", what, f"{shape}/{n}", str(folder), root=root,
                                 limit=args.memory_limit)
                    label = f"{shape}{tag}"
                    print(f"{label:<18} {n:>12,} {built['write_s']:>8.1f} "
                          f"{res['verify_s']:>9.1f} {res['verify_peak_mb']:>15,.0f} "
                          f"{res.get('temp_peak_gb', 0.0):>8.2f} {res['anomalies']}",
                          flush=True)
            finally:
                shutil.rmtree(folder, ignore_errors=True)
    print(f"load {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} at end")


if __name__ == "__main__":
    main()
