"""The golden run: a topology's fault-free output, computed once and cached.

A producer computes the golden output (``ftctl.sim.golden.golden_output``: the same runtime
code as every run, on the simulation host with the ``none`` protocol and no failures);
verification never runs a host itself. The output is cached under a hash of the topology model's
canonical JSON, which covers the operators, edges and the input (records, seed, batch),
plus a fingerprint of the code that computes it so a change to an operator invalidates
the cache instead of silently comparing runs against a stale golden output.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ftctl.config.topology import Topology
from ftctl.results import atomic_write_bytes
from ftctl.runtime.graph import ExecutionGraph
from ftctl.verify.sinkfile import write_sink

Outputs = dict[str, list[tuple[Any, Any]]]
# Computes a topology's fault-free output per sink.
Producer = Callable[[ExecutionGraph], Outputs]
# The same, given a scratch folder to spill to (removed once the files are written): each
# sink's records in order, which may be read from that folder as they are iterated.
StreamingProducer = Callable[[ExecutionGraph, Path],
                             Mapping[str, Iterable[tuple[Any, Any]]]]
DEFAULT_CACHE = Path("results/.golden")
_REPO = Path(__file__).resolve().parent.parent.parent
# The code a golden output depends on: the operators and sources, and the producer's (the
# simulation host, the kernel and the `none` protocol it runs under).
_GOLDEN_CODE = ("ftctl/runtime/*.py", "ftctl/sim/*.py", "ftctl/kernel/*.py",
                "protocols/contract/*.py", "protocols/none.py")


def canonical_json(topology: Topology) -> str:
    """The topology model as JSON with sorted keys and defaults filled in."""
    data = topology.model_dump(mode="json", by_alias=True)
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def topology_hash(topology: Topology) -> str:
    """SHA-256 (hex) of the topology's canonical JSON."""
    return hashlib.sha256(canonical_json(topology).encode()).hexdigest()


def runtime_fingerprint() -> str:
    """A short hash of the source the golden output is computed by."""
    h = hashlib.sha256()
    files = sorted({f for pattern in _GOLDEN_CODE for f in _REPO.glob(pattern)})
    for file in files:
        h.update(str(file.relative_to(_REPO)).encode())
        h.update(file.read_bytes())
    return h.hexdigest()[:12]


def cache_path(topology: Topology, cache_dir: Path = DEFAULT_CACHE) -> Path:
    name = f"{topology.name}-{topology_hash(topology)[:16]}-{runtime_fingerprint()}.pkl"
    return Path(cache_dir) / name


def golden_for(topology: Topology, produce: Producer, cache_dir: Path = DEFAULT_CACHE) -> Outputs:
    """The fault-free output per sink operator: from the cache when it holds it, else from
    ``produce``."""
    path = cache_path(topology, cache_dir)
    cached = _load(path)
    if cached is not None:
        return cached
    outputs = produce(ExecutionGraph(topology))
    atomic_write_bytes(path, pickle.dumps(outputs, protocol=pickle.HIGHEST_PROTOCOL))
    return outputs


def files_path(topology: Topology, cache_dir: Path = DEFAULT_CACHE) -> Path:
    """The folder of the cached golden output as Parquet files, one a sink."""
    return cache_path(topology, cache_dir).with_suffix(".parquet.d")


def golden_files(topology: Topology, produce: StreamingProducer,
                 cache_dir: Path = DEFAULT_CACHE) -> dict[str, Path]:
    """The fault-free output as one Parquet file per sink operator (``ftctl.verify.sinkfile``),
    for the out-of-core checker: from the cache when it holds them, else from ``produce``,
    which spills to a scratch folder beside the cache (``golden_output`` keeps a bounded
    tail per sink instance in memory) and whose output is streamed into the files."""
    folder = files_path(topology, cache_dir)
    index = folder / "sinks.json"  # written last: its presence means every file is whole
    try:
        names: dict[str, str] = json.loads(index.read_text())
        for f in names.values():
            pq.read_metadata(folder / f)  # a damaged file fails here, not in the verdict
        return {sink: folder / f for sink, f in names.items()}
    except (OSError, ValueError, AttributeError, pa.ArrowException):
        pass  # absent or unreadable: computed again
    folder.parent.mkdir(parents=True, exist_ok=True)
    # Its own scratch folder: two runs computing the same golden output do not share one.
    scratch = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.spill-"))
    try:
        outputs = produce(ExecutionGraph(topology), scratch)
        # Files are numbered, not named after the sink: an operator's name need not be a
        # file name.
        names = {sink: f"sink-{i}.parquet" for i, sink in enumerate(sorted(outputs))}
        for sink, file in names.items():
            write_sink(folder / file, outputs[sink])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    atomic_write_bytes(index, json.dumps(names, sort_keys=True).encode())
    return {sink: folder / f for sink, f in names.items()}


def _load(path: Path) -> Outputs | None:
    """The cached output, or None when absent or unreadable (then it is recomputed).

    The cache is written only by ftctl itself, atomically, so unpickling it is safe.
    """
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        obj = pickle.loads(data)
    except Exception:
        return None
    if not isinstance(obj, dict) or not all(isinstance(v, list) for v in obj.values()):
        return None
    return obj
