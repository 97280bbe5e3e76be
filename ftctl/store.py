"""Stable storage for snapshots, and the external sink that output is committed to.

The snapshot store of the Spark host lives behind a location that is a local path or a URI
(``--store``), through ``pyarrow.fs`` (already a dependency, for the run's parquet output):
one API for local folders, mounted volumes and object stores.
"""

from __future__ import annotations

import contextlib
import secrets
import struct
import threading
import time
import zlib
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from pickle import PickleBuffer
from typing import Any, Literal, Protocol

import pyarrow as pa
import pyarrow.fs as pafs

from ftctl import codec, store_segments
from ftctl.spill import ChunkFile, PickledChunk, SpilledRecords
from ftctl.store_segments import Catalog, Located, SegmentWriter, parse_pending, pending_name

# Visible sink records held in memory per instance before a spilling store writes them out.
SPILL_KEEP = 100_000

# Every stored object is framed: MAGIC, the payload's length and its CRC-32, then the
# payload (``codec``). A read checks both, so a truncated or corrupted object is an error,
# never a blob. MAGIC's last byte is the format version; objects written before framing
# (version 0) start with a ``codec`` tag (b"M" or 0x80), never with MAGIC's b"F".
MAGIC = b"FTS\x01"
_HEADER = struct.Struct(">4sQI")


StoredKey = tuple[int, str]  # (snapshot, instance): one stored object


@dataclass(frozen=True)
class LostWrites:
    """What a ``lose-unsynced`` took: the objects removed from the store, their bytes.
    ``ended`` is False when the run ended before the writer's last frames did (a host
    that keeps the account: ``ftctl/spark/durability.py``)."""

    objects: tuple[StoredKey, ...] = ()
    size: int = 0
    ended: bool = True


class StoreError(Exception):
    """A stored object cannot be read (or the store cannot be reached)."""

    def __init__(self, snapshot: int, instance: str, why: str) -> None:
        super().__init__(snapshot, instance, why)
        self.snapshot = snapshot
        self.instance = instance
        self.why = why

    def __str__(self) -> str:
        return f"snapshot {self.snapshot} of {self.instance}: {self.why}"


class CorruptObject(StoreError):
    """The object is there but its bytes are not what was written (corrupt, truncated)."""


class MissingObject(StoreError):
    """No object under this (snapshot, instance)."""


class NeverStored(MissingObject):
    """Nothing durable was ever stored under it, or the coordinator deleted it: a protocol
    that asks for it is wrong, not the store (never a ``StoreFault``)."""


class StoreUnavailable(StoreError):
    """The store answers no read or write for now (a transient outage)."""


class StoreFull(StoreError):
    """A write found no space left (``store-full``): nothing of it was stored. Reads work."""


class Sealed(bytes):
    """A blob ``seal`` already framed (by a task without the store's disk): stored as it
    is, so it keeps the types its writer pickled."""


def seal(blob: Any, parts: list[PickleBuffer] | None = None) -> bytes:
    """``blob`` as a framed object: header (magic, length, checksum), then its bytes
    (``codec.encode_blob``). Given ``parts``, the blob's ``codec.Part`` bytes go there
    instead of into the frame, which then reads back only with them."""
    data = codec.encode_blob(blob, parts)
    return _HEADER.pack(MAGIC, len(data), zlib.crc32(data)) + data


def unseal(data: bytes, snapshot: int, instance: str,
           parts: Sequence[PickleBuffer] = ()) -> Any:
    """The blob in a framed object; ``CorruptObject`` saying why when it does not check.
    An unframed object (format version 0) is decoded as it was written, unchecked."""
    body = checked_frame(data, snapshot, instance)
    return (codec.decode(body, parts) if body is not None
            else _decode_unframed(data, snapshot, instance))


def checked_frame(data: bytes, snapshot: int, instance: str) -> memoryview | None:
    """The payload of a framed object whose length and checksum check, not decoded;
    ``CorruptObject`` saying why when they do not. None: an unframed object (format
    version 0), which has no frame to check (only decoding it tells)."""
    if not data:
        raise CorruptObject(snapshot, instance, "empty object")
    if data[:1] != MAGIC[:1]:
        if data[:1] != codec.MARSHAL_TAG and data[0] != 0x80:
            raise CorruptObject(snapshot, instance, f"unknown format {bytes(data[:1])!r}")
        return None
    if len(data) < _HEADER.size:
        raise CorruptObject(snapshot, instance, f"truncated header ({len(data)} bytes)")
    magic, length, crc = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise CorruptObject(snapshot, instance, f"unknown format {magic!r}")
    body = memoryview(data)[_HEADER.size:]
    if len(body) != length:
        raise CorruptObject(snapshot, instance, f"length {len(body)}, written {length}")
    if zlib.crc32(body) != crc:
        raise CorruptObject(snapshot, instance, "checksum mismatch")
    return body


def _decode_unframed(data: bytes, snapshot: int, instance: str) -> Any:
    try:
        return codec.decode(data)
    except Exception as exc:  # marshal and pickle raise many kinds on bad bytes
        raise CorruptObject(snapshot, instance, f"undecodable: {exc}") from None


def check_object(data: bytes, snapshot: int, instance: str) -> None:
    """Raise ``CorruptObject`` unless ``data`` reads back: a frame's length and checksum
    (its payload not decoded: the restore that follows decodes it once); an unframed
    object is decoded, the only check it has."""
    if checked_frame(data, snapshot, instance) is None:
        _decode_unframed(data, snapshot, instance)


def damaged(data: bytes, kind: Literal["corrupt", "truncate"], at: float) -> bytes:
    """``data`` with one byte flipped at fraction ``at`` of it, or cut there: the damage a
    store fault does to an object, on either host. An object an earlier fault cut to
    nothing stays nothing: there is no byte left to flip."""
    if not data:
        return data
    i = min(len(data) - 1, int(at * len(data)))
    if kind == "truncate":
        return data[:i]
    return data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:]


class SnapshotStore(Protocol):
    def put(self, snapshot: int, instance: str, blob: Any) -> None: ...
    def get(self, snapshot: int, instance: str) -> Any: ...
    def check(self, snapshot: int, instance: str) -> None: ...
    def discard_after(self, snapshot: int) -> None: ...
    def delete(self, snapshot: int, instance: str) -> None: ...
    def snapshots_of(self, instance: str) -> list[int]: ...
    def bytes_written(self) -> int: ...


class MemoryStore:
    """Stable storage for the simulation host: survives instance failures by construction,
    unless a store fault (``ftctl/sim/store_faults.py``) damages, deletes or withholds it.

    Objects are kept framed (``seal``), so a read checks them as DirectoryStore's does.
    A blob's ``codec.Part`` bytes are kept beside its frame, not copied into it: they are
    immutable, and every snapshot of a sink holds the parts of the ones before. A fault
    damages the frame, which its checksum then refuses, as it would the whole object.
    A write is durable once its writer's persist is acknowledged (``sync``): by the
    contract, a ``Report`` or ``Emit`` after a ``Persist`` takes effect only once the write
    is durable, so the host syncs the writer's writes when it carries out either. Until
    then ``lose_unsynced`` (the writer crashed with them in its page cache) can take them.
    """

    def __init__(self) -> None:
        self.blobs: dict[tuple[int, str], bytes] = {}
        self.parts: dict[tuple[int, str], tuple[PickleBuffer, ...]] = {}  # beside a frame
        # What was written and not discarded: the store's listing. An object a fault
        # deleted stays listed, so a read of it is a MissingObject, not "never stored".
        self.listed: set[tuple[int, str]] = set()
        self.writes = 0
        self.unavailable = 0  # outages under way: every get and put fails meanwhile
        self.full = 0  # store-full faults under way: every put fails meanwhile
        # store-slow faults under way (fault id -> seconds per operation): the simulation
        # host delays reads and writes by the largest (``ftctl/sim/store_faults.py``)
        self.latencies: dict[int, float] = {}
        self.unsynced: dict[str, set[tuple[int, str]]] = {}  # writer -> its open writes

    @property
    def latency(self) -> float:
        """Seconds each read or write takes now (0: the store is not slow)."""
        return max(self.latencies.values(), default=0.0)

    def _reachable(self, snapshot: int, instance: str) -> None:
        if self.unavailable:
            raise StoreUnavailable(snapshot, instance, "store unavailable")

    def put(self, snapshot: int, instance: str, blob: Any, writer: str | None = None) -> None:
        self._reachable(snapshot, instance)
        if self.full:
            raise StoreFull(snapshot, instance, "no space left in the store")
        parts: list[PickleBuffer] = []
        self.blobs[(snapshot, instance)] = seal(blob, parts)
        if parts:
            self.parts[(snapshot, instance)] = tuple(parts)
        else:
            self.parts.pop((snapshot, instance), None)
        self.listed.add((snapshot, instance))
        self.writes += 1
        if writer is not None:
            self.unsynced.setdefault(writer, set()).add((snapshot, instance))

    def payload_bytes(self, snapshot: int, instance: str) -> int:
        """Bytes of a stored blob as encoded, without its frame's header: its parts
        included, which a store on disk writes with it."""
        parts = self.parts.get((snapshot, instance), ())
        return len(self.blobs[(snapshot, instance)]) - _HEADER.size + sum(
            p.raw().nbytes for p in parts)

    def get(self, snapshot: int, instance: str) -> Any:
        return unseal(self._read(snapshot, instance), snapshot, instance,
                      self.parts.get((snapshot, instance), ()))

    def check(self, snapshot: int, instance: str) -> None:
        """Raise what ``get`` would, without decoding the object."""
        check_object(self._read(snapshot, instance), snapshot, instance)

    def _read(self, snapshot: int, instance: str) -> bytes:
        self._reachable(snapshot, instance)
        data = self.blobs.get((snapshot, instance))
        if data is None:
            if (snapshot, instance) not in self.listed:
                raise NeverStored(snapshot, instance, "no such object")
            raise MissingObject(snapshot, instance, "listed, its data gone")
        return data

    def sync(self, writer: str) -> None:
        """``writer``'s writes so far are durable: its persist was acknowledged."""
        self.unsynced.pop(writer, None)

    def lose_unsynced(self, writer: str) -> list[tuple[int, str]]:
        """``writer`` crashed with writes not yet durable: they vanish. Returns them."""
        lost = sorted(k for k in self.unsynced.pop(writer, ()) if k in self.listed)
        for key in lost:  # never durable: neither its data nor its listing survives
            self.blobs.pop(key, None)
            self.parts.pop(key, None)
            self.listed.discard(key)
        return lost

    def discard_after(self, snapshot: int) -> None:
        for key in [k for k in self.listed if k[0] > snapshot]:
            self.listed.discard(key)
            self.blobs.pop(key, None)
            self.parts.pop(key, None)

    def delete(self, snapshot: int, instance: str) -> None:
        self.blobs.pop((snapshot, instance), None)
        self.parts.pop((snapshot, instance), None)
        self.listed.discard((snapshot, instance))

    def snapshots_of(self, instance: str) -> list[int]:
        return sorted(s for s, i in self.listed if i == instance)

    def clear(self) -> None:
        """Drop every object: the run that used the store is over."""
        self.blobs.clear()
        self.parts.clear()
        self.listed.clear()
        self.unsynced.clear()

    def bytes_written(self) -> int:
        return 0


def open_location(location: str | Path) -> tuple[pafs.FileSystem, str, str]:
    """``(filesystem, path in it, canonical location)`` for a local path or a URI.

    A URI (``file:///srv/ftctl``, ``s3://bucket/prefix``, ``hdfs://...``: whatever
    ``pyarrow.fs`` supports here) is used as given; a plain path is made absolute, since
    tasks find the store by it from the executor's working directory, not the driver's.
    Raises ValueError, naming the location, when pyarrow cannot open it.
    """
    text = str(location)
    if "://" not in text:
        path = str(Path(text).expanduser().resolve())
        return pafs.LocalFileSystem(), path, path
    try:
        fs, path = pafs.FileSystem.from_uri(text)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
        raise ValueError(f"cannot open store {text!r}: {exc}") from None
    return fs, path.rstrip("/"), text.rstrip("/")


def local_dirs(location: str | None) -> list[str]:
    """The local directory behind ``location``, if it is one (for bind mounts)."""
    if location is None:
        return []
    fs, path, _ = open_location(location)
    return [path] if isinstance(fs, pafs.LocalFileSystem) else []


def join_location(location: str, *parts: str) -> str:
    """``location`` (path or URI) with path parts appended."""
    return "/".join([location.rstrip("/"), *parts])


class DirectoryStore:
    """The Spark host's snapshot store: framed objects (``seal``) appended to segment
    files under ``<root>/segments``, and the catalog (``<root>/catalog``) saying which
    object is each instance's part of each snapshot (``ftctl/store_segments.py``).

    ``root`` is a local path or a URI: every access goes through ``pyarrow.fs``, so a store
    on a filesystem the executors share with the driver (NFS, HDFS, a volume mounted in
    containers) works the same as the default folder under the run directory.

    Only ftctl's own processes write here, so what ``codec`` reads back is safe. The store
    made with ``DirectoryStore(root)`` is its owner (the coordinator's): it alone writes
    the catalog. Instances that see the same store (tasks on the driver's machine,
    containers with it mounted, executors given the same URI) append their blobs
    themselves with ``write_pending``, and the owner ``adopt``s them once the writer's
    report is current: a blob never travels to the coordinator, and a stopped
    incarnation's late write is never adopted. Tasks that do not see it send their blobs
    over the control connection instead.
    """

    KEY_FILE = ".store-key"
    CATALOG = "catalog"
    SEGMENTS = "segments"
    # While this file is in the store, every read and write of an object fails with
    # ``StoreUnavailable`` (the ``store-unavailable`` fault, ``chaos/store_faults.py``):
    # the one signal that reaches every process using the store, the driver's and the
    # tasks', wherever the store is. The store's other fault markers work the same: while
    # FULL_FILE is there every write fails with ``StoreFull`` (``store-full``); while
    # SLOW_FILE is there each read and write first waits the seconds it holds
    # (``store-slow``). One metadata lookup of the three per object read or write.
    OUTAGE_FILE = ".unavailable"
    FULL_FILE = ".full"
    SLOW_FILE = ".slow"

    def __init__(self, root: Path | str):
        fs, path, location = open_location(root)
        fs.create_dir(path, recursive=True)
        self._setup(fs, path, location, None, owner=True)

    def _setup(self, fs: pafs.FileSystem, path: str, location: str, key: str | None,
               owner: bool, segment_bytes: int | None = None) -> None:
        self.fs, self._path, self.root = fs, path, location
        self._bytes = 0
        self._key = key
        self._owner = owner
        self._lock = threading.Lock()  # the driver's loop and the nemesis both write
        self._writer = SegmentWriter(fs, f"{path}/{self.SEGMENTS}", segment_bytes)
        self._catalog = Catalog()
        self._log: Any = None  # the owner's open catalog
        self._seen = 0  # bytes of the catalog replayed
        self._generation = 0  # how many times the owner wrote the catalog anew
        self._compact_at = store_segments.COMPACT_BYTES
        self._compacted_size = -1  # the catalog's bytes when last written anew
        self._refresh()  # an owner reopening a store starts from what it holds

    def key(self) -> str:
        """A random key kept in the store: a writer that reads it back shares it. The
        owner's segment size goes with it, so that every writer rolls over alike."""
        if self._key is None:
            self._key = secrets.token_hex(16)
            with self.fs.open_output_stream(f"{self._path}/{self.KEY_FILE}") as f:
                f.write(f"{self._key}\n{self._writer.limit}\n".encode())
        return self._key

    @classmethod
    def shared(cls, root: str, key: str) -> DirectoryStore | None:
        """The store at ``root`` if this process sees the same store as its owner: it
        writes objects for the owner to adopt and reads the owner's catalog."""
        try:
            fs, path, location = open_location(root)
            with fs.open_input_stream(f"{path}/{cls.KEY_FILE}") as f:
                kept, *rest = f.read().decode().split()
            if kept != key:
                return None
            segment_bytes = int(rest[0]) if rest else None
        except (OSError, ValueError, UnicodeError):
            return None
        store = cls.__new__(cls)
        store._setup(fs, path, location, key, owner=False, segment_bytes=segment_bytes)
        return store

    def outage_path(self) -> str:
        return f"{self._path}/{self.OUTAGE_FILE}"

    def marker_path(self, name: str) -> str:
        """Where one of the store's fault markers (``OUTAGE_FILE``, ...) is, in ``self.fs``."""
        return f"{self._path}/{name}"

    def segment_path(self, segment: str) -> str:
        return f"{self._path}/{self.SEGMENTS}/{segment}"

    def _reachable(self, snapshot: int, instance: str, write: bool = False) -> None:
        """Raise what the store's fault markers say of this operation, after waiting what
        a ``store-slow`` marker says it takes."""
        markers = [self.outage_path(), self.marker_path(self.FULL_FILE),
                   self.marker_path(self.SLOW_FILE)]
        try:
            down, full, slow = (i.type != pafs.FileType.NotFound
                                for i in self.fs.get_file_info(markers))
        except OSError as exc:
            raise StoreUnavailable(snapshot, instance, str(exc)) from None
        if down:
            raise StoreUnavailable(snapshot, instance, "store unavailable")
        if slow:
            time.sleep(self._latency(markers[2]))
        if full and write:
            raise StoreFull(snapshot, instance, "no space left in the store")

    def _latency(self, path: str) -> float:
        """The seconds a ``store-slow`` marker holds (0 if it went meanwhile or is bad)."""
        try:
            with self.fs.open_input_stream(path) as f:
                return max(0.0, float(f.read().decode()))
        except (OSError, ValueError, UnicodeError):
            return 0.0

    # ------------------------------------------------------------------ the catalog

    def _refresh(self) -> None:
        """Replay what the owner appended to the catalog since this process last read it
        (the owner's own changes are applied as it makes them); all of it again once the
        owner wrote it anew (a new generation in its first line)."""
        path = f"{self._path}/{self.CATALOG}"
        try:
            with self.fs.open_input_file(path) as f:
                size = f.size()
                generation = Catalog.generation(
                    f.read_at(min(size, store_segments.HEAD_BYTES), 0))
                if generation != self._generation:
                    self._catalog, self._seen = Catalog(), 0
                    self._generation = generation
                if size <= self._seen:
                    return
                data = f.read_at(size - self._seen, self._seen)
        except FileNotFoundError:
            return
        self._seen += self._catalog.replay(data)

    def _change(self, entry: list[Any]) -> None:
        """The owner's change of the catalog: logged, then applied; segments left with
        no part that their writer is done with are deleted. Under the lock."""
        if not self._owner:
            raise RuntimeError("only the store's owner changes its catalog")
        if self._log is None:
            self._log = self.fs.open_append_stream(f"{self._path}/{self.CATALOG}",
                                                   compression=None)
        line = Catalog.line(entry)
        self._log.write(line)
        self._seen += len(line)
        for segment in self._catalog.apply(entry):
            with contextlib.suppress(OSError):
                self.fs.delete_file(self.segment_path(segment))
        if self._seen >= self._compact_at:
            self._compact()

    def _compact(self) -> None:
        """Write the catalog anew, live parts only, and put it in the old one's place at
        once (a rename): a reader holding the old one reads it whole, and its next
        refresh sees the new generation and replays the new one. Under the lock."""
        path = f"{self._path}/{self.CATALOG}"
        data = self._catalog.compacted(self._generation + 1)
        try:
            with self.fs.open_output_stream(f"{path}.new", compression=None) as out:
                out.write(data)
            self._log.close()
            self._log = None
            self.fs.move(f"{path}.new", path)
        except OSError:
            # Writing it anew only spares readers a longer replay: where that fails the
            # old catalog goes on, as it was, and the next try waits until it doubled.
            with contextlib.suppress(OSError):
                self.fs.delete_file(f"{path}.new")
            if self._log is None:
                self._log = self.fs.open_append_stream(path, compression=None)
            self._compact_at = 2 * self._seen
            return
        self._log = self.fs.open_append_stream(path, compression=None)
        self._generation += 1
        self._seen = self._compacted_size = len(data)
        self._compact_at = max(store_segments.COMPACT_BYTES, 4 * len(data))

    def _current(self) -> Catalog:
        """The catalog as the owner last wrote it: a reader replays what it added since."""
        if not self._owner:
            self._refresh()
        return self._catalog

    def locate(self, snapshot: int, instance: str) -> Located | None:
        """Where the instance's part of ``snapshot`` is; None if the store has none."""
        return self._current().locate(snapshot, instance)

    # ------------------------------------------------------------------ objects

    def _append(self, snapshot: int, instance: str, blob: Any,
                catalog: bool) -> Located:
        """Frame ``blob`` (with its checksum, unless a task framed it already) and append
        it to this process's segment; with ``catalog``, make it the instance's part."""
        self._reachable(snapshot, instance, write=True)
        data = blob if isinstance(blob, Sealed) else seal(blob)
        with self._lock:
            loc = self._writer.write(data)
            if catalog:
                self._change(["p", snapshot, instance, loc.segment, loc.offset, loc.size])
                self._bytes += loc.size
        return loc

    def put(self, snapshot: int, instance: str, blob: Any) -> None:
        self._append(snapshot, instance, blob, catalog=True)

    def write_pending(self, snapshot: int, instance: str, blob: Any) -> tuple[str, int]:
        """Append a blob to this process's segment; returns (name, bytes) for ``adopt``."""
        loc = self._append(snapshot, instance, blob, catalog=False)
        return pending_name(loc), loc.size

    def adopt(self, snapshot: int, instance: str, name: str, size: int) -> None:
        """Make a blob written by ``write_pending`` the instance's part of ``snapshot``."""
        loc = parse_pending(name, size)
        self._reachable(snapshot, instance)
        with self._lock:
            self._change(["p", snapshot, instance, loc.segment, loc.offset, loc.size])
            self._bytes += size

    def size_of(self, snapshot: int, instance: str) -> int | None:
        """Bytes of one instance's part of a snapshot; None if it is not there."""
        loc = self.locate(snapshot, instance)
        return None if loc is None else loc.size

    def get(self, snapshot: int, instance: str) -> Any:
        """The blob; ``MissingObject`` or ``CorruptObject`` when it cannot be trusted."""
        return unseal(self._read(snapshot, instance), snapshot, instance)

    def check(self, snapshot: int, instance: str) -> None:
        """Raise what ``get`` would, reading the object but not decoding it."""
        check_object(self._read(snapshot, instance), snapshot, instance)

    def _read(self, snapshot: int, instance: str) -> bytes:
        self._reachable(snapshot, instance)
        loc = self.locate(snapshot, instance)
        if loc is None:
            raise MissingObject(snapshot, instance, "not in the store's catalog")
        return self._bytes_at(snapshot, instance, loc)

    def _bytes_at(self, snapshot: int, instance: str, loc: Located) -> bytes:
        """The object's bytes as they are: fewer than written if its segment lost them."""
        path = self.segment_path(loc.segment)
        try:
            with self.fs.open_input_file(path) as f:
                return bytes(f.read_at(loc.size, loc.offset))
        except FileNotFoundError:
            raise MissingObject(snapshot, instance, f"no file {path}") from None
        except OSError as exc:
            raise StoreUnavailable(snapshot, instance, str(exc)) from None

    def damage(self, snapshot: int, instance: str,
               kind: Literal["corrupt", "truncate", "delete"], at: float) -> int:
        """A store fault's damage to one object (``chaos/store_faults.py``): removed, or
        its bytes flipped or cut at fraction ``at`` (``damaged``), written anew and made
        the part in its place, so no reader sees half of it. Its size before; raises
        FileNotFoundError if it is not in the store."""
        with self._lock:
            loc = self._catalog.locate(snapshot, instance)
            if loc is None:
                raise FileNotFoundError(f"snapshot {snapshot} of {instance}")
            if kind == "delete":
                self._change(["d", snapshot, instance])
                return loc.size
            data = self._bytes_at(snapshot, instance, loc)
            bad = self._writer.write(damaged(data, kind, at))
            self._change(["p", snapshot, instance, bad.segment, bad.offset, bad.size])
            return len(data)

    def discard_after(self, snapshot: int) -> None:
        with self._lock:
            self._change(["a", snapshot])

    def delete(self, snapshot: int, instance: str) -> None:
        with self._lock:
            if self._catalog.locate(snapshot, instance) is not None:
                self._change(["d", snapshot, instance])

    def snapshots_of(self, instance: str) -> list[int]:
        return self._current().snapshots_of(instance)

    def bytes_written(self) -> int:
        return self._bytes

    def close(self) -> None:
        """Close this process's open segment and catalog (the store stays usable). The
        owner writes its catalog anew first if it changed since it last did: whatever
        opens the store later replays live parts only."""
        with self._lock:
            self._writer.close()
            if self._log is not None and self._seen > self._compacted_size:
                with contextlib.suppress(OSError):
                    self._compact()
            log, self._log = self._log, None
            if log is not None:
                with contextlib.suppress(OSError):
                    log.close()


class SinkStore:
    """The external world: what a sink made visible stays visible.

    Transactional commits are idempotent per (sink instance, epoch), like a sink that
    records its last committed transaction id.

    With ``spill`` (a directory), an instance's visible records beyond ``keep`` in memory
    are appended to a file there, so a long run holds a bounded tail of its output, not
    all of it; ``records``/``by_operator`` read the whole output back, in order, and
    ``streamed`` gives it to be read a chunk at a time.
    """

    def __init__(self, spill: Path | None = None, keep: int = SPILL_KEEP) -> None:
        self.visible: dict[str, list[tuple[Any, Any]]] = defaultdict(list)
        self.committed: dict[str, int] = {}
        # Per sink instance, how many records of each named batch it showed (``Emit.uid``)
        self.named: dict[str, dict[Hashable, int]] = defaultdict(dict)
        self.spill = spill
        self.keep = keep
        self._files: dict[str, ChunkFile] = {}  # records on disk, per instance

    def append(self, instance: str, records: Sequence[tuple[Any, Any]],
               uid: Hashable | None = None) -> None:
        """``uid``, when given, names the batch: its record ``k`` is ``(uid, k)``, and a
        named record already shown is not shown again (an idempotent upsert in the outside
        world). Names are given to whole batches from record 0, so what was shown of a
        batch is always its first records: a count per name says which."""
        if uid is not None:
            named = self.named[instance]
            shown = named.get(uid, 0)
            if shown >= len(records):
                return
            named[uid] = len(records)
            records = records[shown:]
        self.visible[instance].extend(records)
        self._maybe_spill(instance)

    def append_pickled(self, instance: str, chunk: PickledChunk) -> None:
        """``append`` for records pickled by the sink's task: with a spill, the bytes go
        to the file as they are, never decoded here (after the tail in memory, which is
        written first, to keep the order)."""
        if self.spill is None:
            self.append(instance, chunk.records())
            return
        tail = self.visible[instance]
        if tail:
            self._file(instance).append(tail)
            self.visible[instance] = []
        self._file(instance).append_pickled(chunk.blob, chunk.count)

    def _file(self, instance: str) -> ChunkFile:
        assert self.spill is not None
        if instance not in self._files:
            self._files[instance] = ChunkFile(self.spill / f"{instance}.pickle")
        return self._files[instance]

    def commit(self, instance: str, epoch: int, records: list[tuple[Any, Any]]) -> bool:
        return self.commit_parts(instance, epoch, [records])

    def commit_parts(self, instance: str, epoch: int,
                     parts: Sequence[Sequence[tuple[Any, Any]] | PickledChunk]) -> bool:
        """Make the records of ``parts`` visible, in order, unless ``epoch`` is already
        committed (then nothing changes: False)."""
        if self.committed.get(instance, 0) >= epoch:
            return False
        self.committed[instance] = epoch
        for part in parts:
            if isinstance(part, PickledChunk):
                self.append_pickled(instance, part)
            else:
                self.visible[instance].extend(part)
                self._maybe_spill(instance)
        return True

    def count(self, instance: str) -> int:
        """Records ``instance`` has made visible so far, on disk and in memory."""
        spilled = self._files.get(instance)
        return (spilled.records if spilled is not None else 0) + len(self.visible[instance])

    def records(self, instance: str) -> list[tuple[Any, Any]]:
        """Everything ``instance`` made visible, in the order it did."""
        out: list[tuple[Any, Any]] = []
        for chunk in self._files.get(instance, ()):
            out.extend(chunk)
        out.extend(self.visible[instance])
        return out

    def _maybe_spill(self, instance: str) -> None:
        tail = self.visible[instance]
        if self.spill is None or len(tail) <= self.keep:
            return
        self._file(instance).append(tail)
        self.visible[instance] = []

    def by_operator(self) -> dict[str, list[tuple[Any, Any]]]:
        """Visible output per sink operator (instances ``out[0]``, ``out[1]`` -> ``out``)."""
        out: dict[str, list[tuple[Any, Any]]] = defaultdict(list)
        for iid in sorted(self.visible.keys() | self._files.keys()):
            out[iid.split("[", 1)[0]].extend(self.records(iid))
        return dict(out)

    def streamed(self) -> dict[str, SpilledRecords]:
        """``by_operator`` without reading the spill back: each operator's records are
        read from disk whenever they are iterated (the run's end: nothing is appended
        after this)."""
        parts: dict[str, list[ChunkFile | list[tuple[Any, Any]]]] = defaultdict(list)
        for iid in sorted(self.visible.keys() | self._files.keys()):
            if iid in self._files:
                parts[iid.split("[", 1)[0]].append(self._files[iid])
            parts[iid.split("[", 1)[0]].append(self.visible[iid])
        return {op: SpilledRecords(p) for op, p in parts.items()}
