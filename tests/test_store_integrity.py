"""Stored objects carry their length and checksum: a damaged or missing one is a typed
error on read, never a blob (MemoryStore on the simulation host, DirectoryStore on Spark);
a start's pre-check checks the frame without decoding it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ftctl import codec
from ftctl.store import (
    CorruptObject,
    DirectoryStore,
    MemoryStore,
    MissingObject,
    Sealed,
    StoreUnavailable,
    damaged,
    seal,
)
from tests.test_store_faults_driver import _host, _restart_from_1

BLOB = {"state": {"a": 3, "b": 4}, "offset": 17, "held": [("w", 1)] * 20}


def _file(store: DirectoryStore) -> Path:
    """The segment holding snapshot 2 of map[0], the store's only object."""
    loc = store.locate(2, "map[0]")
    assert loc is not None and loc.offset == 0
    return Path(store.segment_path(loc.segment))


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:]


@pytest.mark.parametrize("damage", ["flip-payload", "flip-header", "truncate", "empty"])
def test_a_damaged_directory_store_file_is_a_corrupt_object(tmp_path: Path,
                                                             damage: str) -> None:
    store = DirectoryStore(tmp_path)
    store.put(2, "map[0]", BLOB)
    data = _file(store).read_bytes()
    bad = {"flip-payload": _flip(data, len(data) - 3), "flip-header": _flip(data, 6),
           "truncate": data[:-5], "empty": b""}[damage]
    _file(store).write_bytes(bad)
    with pytest.raises(CorruptObject) as err:
        store.get(2, "map[0]")
    assert (err.value.snapshot, err.value.instance) == (2, "map[0]")


def test_a_deleted_directory_store_file_is_a_missing_object(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    store.put(2, "map[0]", BLOB)
    assert store.get(2, "map[0]") == BLOB
    _file(store).unlink()
    with pytest.raises(MissingObject, match="snapshot 2 of map"):
        store.get(2, "map[0]")


def test_a_file_written_before_framing_still_reads(tmp_path: Path) -> None:
    # format version 0: the codec's bytes alone
    store = DirectoryStore(tmp_path)
    store.put(2, "map[0]", Sealed(codec.encode(BLOB)))  # stored as it is
    assert store.get(2, "map[0]") == BLOB
    store.put(2, "map[0]", Sealed(codec.encode(BLOB)[:-4]))  # unchecked, yet undecodable
    with pytest.raises(CorruptObject):
        store.get(2, "map[0]")


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_damaged_memory_store_entry_is_a_corrupt_object(damage: str) -> None:
    store = MemoryStore()
    store.put(2, "map[0]", BLOB)
    data = store.blobs[(2, "map[0]")]
    store.blobs[(2, "map[0]")] = _flip(data, len(data) // 2) if damage == "flip" else data[:-1]
    with pytest.raises(CorruptObject):
        store.get(2, "map[0]")


def test_a_memory_store_keeps_a_copy_and_names_what_is_missing() -> None:
    store = MemoryStore()
    blob = {"xs": [1, 2]}
    store.put(1, "src[0]", blob)
    blob["xs"].append(3)  # the writer's later changes are not the snapshot's
    assert store.get(1, "src[0]") == {"xs": [1, 2]}
    store.delete(1, "src[0]")
    with pytest.raises(MissingObject):
        store.get(1, "src[0]")


def test_an_unavailable_memory_store_fails_reads_and_writes() -> None:
    store = MemoryStore()
    store.put(1, "src[0]", BLOB)
    store.unavailable += 1
    with pytest.raises(StoreUnavailable):
        store.get(1, "src[0]")
    with pytest.raises(StoreUnavailable):
        store.put(2, "src[0]", BLOB)
    store.unavailable -= 1
    assert store.get(1, "src[0]") == BLOB


def test_writes_not_yet_acknowledged_vanish_with_their_writer() -> None:
    store = MemoryStore()
    store.put(1, "map[0]", BLOB, writer="map[0]")
    store.sync("map[0]")  # its report reached the coordinator
    store.put(2, "map[0]", BLOB, writer="map[0]")
    store.put(2, "map[1]", BLOB, writer="map[1]")
    assert store.lose_unsynced("map[0]") == [(2, "map[0]")]
    assert store.snapshots_of("map[0]") == [1]
    assert store.snapshots_of("map[1]") == [2]


def test_an_object_whose_data_is_gone_stays_listed_and_reads_as_missing() -> None:
    # a recovery asking for what the listing shows must hear it is gone, not get None
    store = MemoryStore()
    store.put(4, "ones[1]", BLOB)
    del store.blobs[(4, "ones[1]")]  # what a delete fault does
    assert store.snapshots_of("ones[1]") == [4]
    with pytest.raises(MissingObject, match="listed, its data gone"):
        store.get(4, "ones[1]")
    store.delete(4, "ones[1]")  # the coordinator's own delete drops the listing too
    assert store.snapshots_of("ones[1]") == []


def test_check_verifies_the_frame_without_decoding(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "snapshots")
    store.put(1, "count[0]", {"pad": "x" * 100})
    memory = MemoryStore()
    memory.put(1, "count[0]", {"pad": "x" * 100})
    memory.blobs[(2, "count[0]")] = damaged(seal({"pad": "y" * 100}), "corrupt", 0.9)
    memory.listed.add((2, "count[0]"))

    def no_decode(data: Any) -> Any:
        raise AssertionError("decoded")

    monkeypatch.setattr(codec, "decode", no_decode)
    store.check(1, "count[0]")
    memory.check(1, "count[0]")
    with pytest.raises(CorruptObject, match="checksum"):
        memory.check(2, "count[0]")


def test_a_spark_restart_decodes_each_restore_once(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    host, jobs = _host(tmp_path)
    decoded: list[object] = []
    decode = codec.decode

    def counting(data: Any, *parts: Any) -> Any:
        decoded.append(data)
        return decode(data, *parts)

    monkeypatch.setattr(codec, "decode", counting)
    _restart_from_1(host)
    assert ("count[0]", 1) in jobs.submitted
    assert len(decoded) == 1  # the pre-check read its frame; the start decoded it


def test_an_object_cut_to_nothing_can_be_damaged_again() -> None:
    # Two faults on one object: a truncate at its first byte, then a corrupt (a sink's
    # newest delta drawn twice, sharder under lineage, every fault kind, seed 142).
    store = MemoryStore()
    store.put(2, "out[0]", BLOB)
    key = (2, "out[0]")
    store.blobs[key] = damaged(store.blobs[key], "truncate", 0.0)
    store.blobs[key] = damaged(store.blobs[key], "corrupt", 0.7)
    assert store.blobs[key] == b""
    with pytest.raises(CorruptObject):
        store.get(2, "out[0]")
