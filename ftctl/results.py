"""The stored record of one run: ``results/<run-id>/``.

Layout of a run directory::

    run.json        id, topology, protocol, kind, creation time (written once)
    status.json     running | complete | incomplete | failed | abandoned, with the time
    config.json     the resolved configuration
    events.jsonl    the run's history, one record a line (docs/history.md): faults,
                    detections, restarts, protocol notes ...
    outputs/<sink>.parquet   sink output, columns key and value as Python literals (repr)
    metrics.jsonl   metric rows (``t`` on the Spark host's clock, from its start)
    series.json     sink throughput and output latency on the events' clock, and the
                    host clock's offset to it (what the report plots)
    verdict.json    the verification verdict

Every JSON file is written to a temporary name and renamed over the target, so a reader
never sees half a file. ``events.jsonl`` is appended and flushed line by line instead, so
an interrupted run keeps the events it logged. A run counts as finished only when its
status is ``complete`` or ``failed``; anything else found on disk (``running`` left behind
by a killed process, a missing or unreadable status) means it did not finish and must never
be reported as passed. ``running`` records the process running the run; the first reader
that finds that process gone marks the run ``abandoned`` (reason ``killed``), and so do
the next run created under the same root and ``ftctl cluster status``
(``mark_abandoned``).
"""

from __future__ import annotations

import ast
import contextlib
import itertools
import json
import os
import secrets
import socket
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import psutil
import pyarrow as pa
import pyarrow.parquet as pq

from ftctl.config.errors import ConfigError
from ftctl.kernel.history import ROUTINE_KINDS, History, HistoryEvent, read_history

# ``abandoned``: recorded ``running`` by a process that is gone (killed, SIGKILL skipping
# every handler); like ``incomplete``, it never finished.
STATUSES = ("running", "complete", "incomplete", "failed", "abandoned")
FINISHED = ("complete", "failed")
DEFAULT_ROOT = Path("results")
# Sink outputs on disk: both columns Python literals (``encode_value``).
OUTPUT_SCHEMA = pa.schema([("key", pa.string()), ("value", pa.string())])
OUTPUT_ROW_GROUP = 1 << 20  # records a row group


# ------------------------------------------------------------------ atomic file helpers


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same directory and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        _unlink_quietly(Path(tmp))
        raise


def atomic_write_json(path: Path, obj: Any) -> None:
    # default=str: a Path or enum in a config must not abort the write of a whole run.
    text = json.dumps(obj, indent=2, sort_keys=False, default=str)
    atomic_write_bytes(path, (text + "\n").encode())


def _read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _unlink_quietly(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


# ------------------------------------------------------------------ output value encoding


def _plain(value: Any) -> Any:
    """Numpy scalars as Python scalars, recursively, so their repr is a plain literal."""
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    item = getattr(value, "item", None)
    if item is not None and type(value).__module__ == "numpy":
        return item()
    return value


def encode_value(value: Any) -> str:
    """A Python literal for ``value``; ``decode_value`` gives an equal value back."""
    text = repr(_plain(value))
    if not isinstance(value, int | str | bool | None):
        # Fail at write time, naming the value, rather than at re-verification time.
        try:
            decode_value(text)
        except (ValueError, SyntaxError) as exc:
            raise ValueError(f"output value {value!r} is not a Python literal") from exc
    return text


# Types whose ``encode_value`` is their ``repr``: no numpy scalar to unwrap, nothing to check.
_REPR_TYPES = frozenset({str, int, bool, type(None)})


def encode_values(values: Sequence[Any]) -> list[str]:
    """``encode_value`` of each of ``values``.

    A column of only str, int, bool and None (a word count's words and counts) is a
    ``repr`` each, at C speed: value by value, ``encode_value``'s checks took most of the
    time ``outputs/`` took to write (about 1 us a value).
    """
    if set(map(type, values)) <= _REPR_TYPES:
        return list(map(repr, values))
    return [encode_value(v) for v in values]


@lru_cache(maxsize=65536)
def decode_value(text: str) -> Any:
    # Cached: sink outputs repeat the same keys and small counts many times over.
    return ast.literal_eval(text)


# ------------------------------------------------------------------ the run store


class RunStore:
    """One run directory. Create it with ``RunStore.create``, reopen with ``RunStore.open``."""

    def __init__(self, path: Path, meta: dict[str, Any]):
        self.path = Path(path)
        self.run_id: str = meta["run_id"]
        self.meta = meta
        self._lock = threading.Lock()
        # ``t`` of events stays relative to the run's start, also after reopening the run.
        elapsed = max(0.0, time.time() - float(meta.get("created_epoch", time.time())))
        self._t0 = time.monotonic() - elapsed
        log = self.path / "events.jsonl"
        written = sum(1 for _ in self._iter_jsonl(log)) if log.exists() else 0
        # The run's history (docs/history.md): the host, the fault layer and the run
        # machinery all write through it, one seq and one clock for the whole file. Phase
        # records stay in the file only: nothing reads them back from memory, and a long
        # run would hold millions.
        self.history = History("spark", self.clock, sink=self._append, wall=_now_iso,
                               start=written, unkept=ROUTINE_KINDS)

    # -------------------------------------------------------------- construction

    @classmethod
    def create(
        cls,
        root: Path = DEFAULT_ROOT,
        *,
        topology: str,
        protocol: str,
        kind: str = "run",
    ) -> RunStore:
        """A new run directory ``<root>/<YYYYmmdd-HHMMSS>-<topology>-<protocol>-<4 hex>``."""
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        while True:
            stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
            # a mutant's name (lineage/visible-before-durable) is one folder, not two
            run_id = f"{stamp}-{topology}-{protocol.replace('/', '-')}-{secrets.token_hex(2)}"
            path = root / run_id
            try:
                path.mkdir()
                break
            except FileExistsError:
                continue  # same second, same 4 hex digits: draw again
        meta = {
            "run_id": run_id,
            "topology": topology,
            "protocol": protocol,
            "kind": kind,
            "created": _now_iso(),
            "created_epoch": time.time(),
        }
        atomic_write_json(path / "run.json", meta)
        store = cls(path, meta)
        store.mark("running")
        # A run killed before this one must not say ``running`` until someone reads it.
        mark_abandoned(root)
        return store

    @classmethod
    def open(cls, run_id_or_path: str | Path, root: Path = DEFAULT_ROOT) -> RunStore:
        """An existing run by directory path, run id, or unique run-id prefix."""
        path = _resolve_run(run_id_or_path, Path(root))
        try:
            meta = _read_json(path / "run.json")
        except (OSError, ValueError):
            # A directory without readable metadata: still openable for inspection.
            meta = {"run_id": path.name}
        if not isinstance(meta, dict) or "run_id" not in meta:
            meta = {"run_id": path.name}
        return cls(path, meta)

    def __repr__(self) -> str:
        return f"RunStore({str(self.path)!r})"

    def clock(self) -> float:
        """Seconds since the run started: the clock of the events' ``t``."""
        return time.monotonic() - self._t0

    # -------------------------------------------------------------- writers

    def write_config(self, cfg: dict[str, Any]) -> None:
        atomic_write_json(self.path / "config.json", cfg)

    def event(self, kind: str, **data: Any) -> None:
        """Write one history record (``History.write``); its line is flushed at once so
        an interrupted run keeps it."""
        self.history.write(kind, **data)

    def _append(self, rec: dict[str, Any]) -> None:
        line = json.dumps(rec, default=repr) + "\n"
        # Hosts log from several threads (coordinator, listeners): one writer at a time
        # keeps lines whole.
        with self._lock, open(self.path / "events.jsonl", "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()

    def write_outputs(self, outputs: Mapping[str, Iterable[tuple[Any, Any]]]) -> None:
        """Each sink's output, in order, as ``outputs/<sink>.parquet``.

        Written a row group at a time as the records are iterated (they may stream from a
        spill): encoding a whole sink at once held two strings per record on top of the
        records (about 5 GB more at 50M records)."""
        out_dir = self.path / "outputs"
        out_dir.mkdir(exist_ok=True)
        for sink, records in outputs.items():
            target = out_dir / f"{sink}.parquet"
            fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=f".{sink}.", suffix=".tmp")
            os.close(fd)
            try:
                with pq.ParquetWriter(tmp, OUTPUT_SCHEMA) as writer:
                    rest = iter(records)
                    part = list(itertools.islice(rest, OUTPUT_ROW_GROUP))
                    while True:  # one (empty) row group for an empty sink, as before
                        writer.write_table(pa.table({
                            "key": pa.array(encode_values([k for k, _ in part]), pa.string()),
                            "value": pa.array(encode_values([v for _, v in part]),
                                              pa.string()),
                        }, schema=OUTPUT_SCHEMA))
                        part = list(itertools.islice(rest, OUTPUT_ROW_GROUP))
                        if not part:
                            break
                os.replace(tmp, target)
            except BaseException:
                _unlink_quietly(Path(tmp))
                raise

    def write_metrics(self, rows: list[dict[str, Any]]) -> None:
        text = "".join(json.dumps(r, default=repr) + "\n" for r in rows)
        atomic_write_bytes(self.path / "metrics.jsonl", text.encode())

    def write_verdict(self, verdict: dict[str, Any]) -> None:
        atomic_write_json(self.path / "verdict.json", verdict)

    def mark(self, status: str, reason: str | None = None) -> None:
        if status not in STATUSES:
            raise ValueError(f"unknown run status {status!r} (known: {', '.join(STATUSES)})")
        doc: dict[str, Any] = {"status": status, "time": _now_iso()}
        if reason:
            doc["reason"] = reason
        if status == "running":
            # Who is running it: a reader that finds this process gone knows the run was
            # killed (SIGKILL skips every handler) and will never finish.
            me = psutil.Process()
            doc["owner"] = {"host": socket.gethostname(), "pid": me.pid,
                            "create_time": me.create_time()}
        atomic_write_json(self.path / "status.json", doc)

    # -------------------------------------------------------------- readers

    def read_config(self) -> dict[str, Any]:
        return dict(_read_json(self.path / "config.json"))

    def read_history(self) -> list[HistoryEvent]:
        """The run's history, version 1 runs upgraded (``ftctl.kernel.history``)."""
        return read_history(self.read_events())

    def read_events(self) -> list[dict[str, Any]]:
        """Events in order; a torn last line (the process died mid-write) is skipped."""
        return list(self._iter_jsonl(self.path / "events.jsonl"))

    def read_outputs(self) -> dict[str, list[tuple[Any, Any]]]:
        out_dir = self.path / "outputs"
        if not out_dir.is_dir():
            return {}
        outputs: dict[str, list[tuple[Any, Any]]] = {}
        for file in sorted(out_dir.glob("*.parquet")):
            table = pq.read_table(file)
            keys = table.column("key").to_pylist()
            values = table.column("value").to_pylist()
            outputs[file.stem] = [
                (decode_value(k), decode_value(v)) for k, v in zip(keys, values, strict=True)
            ]
        return outputs

    def read_metrics(self) -> list[dict[str, Any]]:
        return list(self._iter_jsonl(self.path / "metrics.jsonl"))

    def read_verdict(self) -> dict[str, Any] | None:
        """The verdict, or None when the run never got one."""
        try:
            return dict(_read_json(self.path / "verdict.json"))
        except FileNotFoundError:
            return None

    def status(self) -> str:
        """The recorded status; ``incomplete`` when none can be read.

        A ``running`` run whose process is gone was killed: it is marked ``abandoned``
        (reason ``killed``) here, by the first command that reads it, so it does not
        say ``running`` forever.
        """
        try:
            doc = _read_json(self.path / "status.json")
            status = doc.get("status")
        except (OSError, ValueError, AttributeError):
            return "incomplete"
        if status == "running" and _owner_gone(doc.get("owner")):
            owner = doc["owner"]
            self.mark("abandoned", f"killed: its ftctl process ({owner['pid']}) ended "
                                   "without finishing the run")
            self.event("killed", pid=owner["pid"])
            return "abandoned"
        return status if status in STATUSES else "incomplete"

    @property
    def finished(self) -> bool:
        """Whether the run got to its end (``complete`` or ``failed``)."""
        return self.status() in FINISHED

    def passed(self) -> bool:
        """True only for a complete run whose verdict says ``passed: true``."""
        if self.status() != "complete":
            return False
        verdict = self.read_verdict()
        return bool(verdict and verdict.get("passed") is True)

    @staticmethod
    def _iter_jsonl(path: Path) -> Iterator[dict[str, Any]]:
        if not path.is_file():
            return
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except ValueError:
                    continue


def _owner_gone(owner: Any) -> bool:
    """Whether the process recorded as running a run has ended (on this host only: a
    process on another machine cannot be looked up from here)."""
    if not isinstance(owner, dict) or owner.get("host") != socket.gethostname():
        return False
    try:
        proc = psutil.Process(int(owner["pid"]))
        if abs(proc.create_time() - float(owner["create_time"])) > 1.0:
            return True  # the pid was reused by another process
        return bool(proc.status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True
    except (psutil.AccessDenied, KeyError, TypeError, ValueError):
        return False


def _resolve_run(run_id_or_path: str | Path, root: Path) -> Path:
    given = Path(run_id_or_path)
    if given.is_dir():
        return given
    if (root / given).is_dir():
        return root / given
    name = str(run_id_or_path)
    matches = sorted(p for p in root.glob(f"{name}*") if p.is_dir()) if root.is_dir() else []
    if len(matches) == 1:
        return matches[0]
    if matches:
        names = ", ".join(p.name for p in matches[:5])
        raise ConfigError(str(root), None, f"run id {name!r} is ambiguous: {names}")
    raise ConfigError(str(root), None, f"no run {name!r} under {root}")


def mark_abandoned(root: Path = DEFAULT_ROOT) -> list[str]:
    """Mark every run under ``root`` recorded ``running`` by a process that is gone as
    ``abandoned``; their ids. Only status files that say ``running`` are looked into."""
    root = Path(root)
    found = []
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        try:
            doc = _read_json(path / "status.json")
            if doc.get("status") != "running" or not _owner_gone(doc.get("owner")):
                continue
            run = RunStore.open(path)
        except (OSError, ValueError, AttributeError, ConfigError):
            continue  # not a run, or half written: its reader decides
        if run.status() == "abandoned":
            found.append(run.run_id)
    return found


def list_runs(root: Path = DEFAULT_ROOT) -> list[RunStore]:
    """Every run directory under ``root`` (those with a run.json), newest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    runs = [RunStore.open(p) for p in root.iterdir() if (p / "run.json").is_file()]
    runs.sort(key=lambda r: (float(r.meta.get("created_epoch", 0.0)), r.run_id), reverse=True)
    return runs
