"""The directory store's layout (``ftctl/store_segments.py``): objects appended to
segments, found through the owner's catalog; segments nothing points into deleted once
their writer moved on; a filesystem that cannot append gets a segment per object."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from ftctl import store_segments
from ftctl.store import DirectoryStore, MissingObject
from ftctl.store_segments import Catalog, Located, SegmentWriter, parse_pending


def _segments(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "segments").iterdir())


def test_many_writes_make_one_segment_per_writer_and_no_file_each(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    task = DirectoryStore.shared(str(tmp_path), store.key())
    assert task is not None
    for ref in range(1, 201):  # a source committing its offset before every batch
        name, size = task.write_pending(ref, "lines[0]", {"offset": ref * 100})
        store.adopt(ref, "lines[0]", name, size)
        store.delete(ref - 1, "lines[0]")
        store.put(ref, "out[0]", {"seen": ref})
    assert len(_segments(tmp_path)) == 2  # the task's and the driver's
    assert store.snapshots_of("lines[0]") == [200]
    assert store.get(200, "lines[0]") == {"offset": 20_000}
    assert store.snapshots_of("out[0]") == list(range(1, 201))


def test_a_reader_and_a_reopened_store_see_what_the_owner_cataloged(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    reader = DirectoryStore.shared(str(tmp_path), store.key())
    assert reader is not None
    store.put(1, "a[0]", {"n": 1})
    assert reader.get(1, "a[0]") == {"n": 1}
    store.put(2, "a[0]", {"n": 2})
    store.put(3, "a[0]", {"n": 3})
    store.discard_after(2)
    store.delete(1, "a[0]")
    assert reader.snapshots_of("a[0]") == [2]  # the lines it had not seen yet, replayed
    with pytest.raises(MissingObject):
        reader.get(3, "a[0]")
    with pytest.raises(RuntimeError, match="owner"):
        reader.discard_after(0)  # a task never changes the catalog
    store.close()
    again = DirectoryStore(tmp_path)
    assert again.snapshots_of("a[0]") == [2] and again.get(2, "a[0]") == {"n": 2}
    again.put(4, "a[0]", {"n": 4})  # and it goes on where the catalog ended
    assert DirectoryStore(tmp_path).snapshots_of("a[0]") == [2, 4]


def test_a_segment_goes_once_nothing_points_into_it_and_its_writer_moved_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_segments, "SEGMENT_BYTES", 1_000)
    store = DirectoryStore(tmp_path)
    task = DirectoryStore.shared(str(tmp_path), store.key())
    assert task is not None
    blob = {"pad": "x" * 300}
    for ref in range(1, 13):  # about three objects a segment
        store.adopt(ref, "s[0]", *task.write_pending(ref, "s[0]", blob))
    first = _segments(tmp_path)
    assert len(first) >= 4
    for ref in range(1, 12):
        store.delete(ref, "s[0]")
    # all but the newest object's segment had nothing left: gone; its own stays
    left = _segments(tmp_path)
    assert left == [first[-1]] and store.get(12, "s[0]") == blob
    store.delete(12, "s[0]")  # the writer's open segment: it may still write there
    assert _segments(tmp_path) == left
    name, size = task.write_pending(13, "s[0]", blob)
    store.adopt(13, "s[0]", name, size)
    assert store.get(13, "s[0]") == blob


def test_a_segment_with_a_live_object_stays(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_segments, "SEGMENT_BYTES", 1_000)
    store = DirectoryStore(tmp_path)
    for ref in range(1, 13):
        store.put(ref, "s[0]", {"pad": "x" * 300, "ref": ref})
    store.discard_after(1)  # snapshot 1 is in the first segment, which stays
    assert len(_segments(tmp_path)) == 2
    assert store.get(1, "s[0]")["ref"] == 1


def test_a_pending_name_is_checked_before_it_is_cataloged() -> None:
    loc = Located("0123456789abcdef-000003.seg", 120, 40)
    assert parse_pending(store_segments.pending_name(loc), 40) == loc
    for bad in ("../x-000001.seg@0", "0123456789abcdef-000003.seg", ".pending-x",
                "0123456789abcdef-000003.seg@-1", "0123456789abcdef-1.seg@0"):
        with pytest.raises(ValueError, match="not a pending"):
            parse_pending(bad, 40)


def test_a_catalog_entry_of_an_unknown_kind_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown catalog entry"):
        Catalog().apply(["x", 1])
    # a line the owner was still writing is not read until it is whole
    catalog = Catalog()
    line = Catalog.line(["p", 1, "a[0]", "0123456789abcdef-000000.seg", 0, 9])
    assert catalog.replay(line + line[:7]) == len(line)
    assert catalog.snapshots_of("a[0]") == [1]


class _NoAppend(pafs.FileSystemHandler):  # type: ignore[misc]
    """A local folder that cannot append, as an object store."""

    def __init__(self) -> None:
        self.fs = pafs.LocalFileSystem()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _NoAppend)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def get_type_name(self) -> str:
        return "no-append"

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths: list[str]) -> Any:
        return self.fs.get_file_info(paths)

    def get_file_info_selector(self, selector: Any) -> Any:
        return self.fs.get_file_info(selector)

    def create_dir(self, path: str, recursive: bool) -> None:
        self.fs.create_dir(path, recursive=recursive)

    def delete_dir(self, path: str) -> None:
        self.fs.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self.fs.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        raise NotImplementedError

    def delete_file(self, path: str) -> None:
        self.fs.delete_file(path)

    def move(self, src: str, dest: str) -> None:
        self.fs.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        self.fs.copy_file(src, dest)

    def open_input_stream(self, path: str) -> Any:
        return self.fs.open_input_stream(path)

    def open_input_file(self, path: str) -> Any:
        return self.fs.open_input_file(path)

    def open_output_stream(self, path: str, metadata: Any) -> Any:
        return self.fs.open_output_stream(path)

    def open_append_stream(self, path: str, metadata: Any) -> Any:
        raise pa.ArrowNotImplementedError("append is not supported")


def test_a_filesystem_that_cannot_append_gets_a_segment_per_object(tmp_path: Path) -> None:
    fs = pafs.PyFileSystem(_NoAppend())
    writer = SegmentWriter(fs, str(tmp_path / "segments"))
    locs = [writer.write(bytes([n]) * 10) for n in range(3)]
    assert len({loc.segment for loc in locs}) == 3 and {loc.offset for loc in locs} == {0}
    for n, loc in enumerate(locs):
        with fs.open_input_file(str(tmp_path / "segments" / loc.segment)) as f:
            assert f.read_at(loc.size, loc.offset) == bytes([n]) * 10
    # the catalog frees a one-object segment once a newer one is written
    catalog = Catalog()
    catalog.apply(["p", 1, "a[0]", locs[0].segment, 0, 10])
    catalog.apply(["p", 2, "a[0]", locs[1].segment, 0, 10])
    assert catalog.apply(["d", 1, "a[0]"]) == [locs[0].segment]
    assert catalog.apply(["d", 2, "a[0]"]) == []  # the writer's newest: it may write on


def test_a_closed_store_writes_on_in_a_new_segment(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    store.put(1, "a[0]", {"n": 1})
    store.close()  # the host's run ended; a figure may still read or damage what is there
    store.put(2, "a[0]", {"n": 2})
    assert len(_segments(tmp_path)) == 2
    assert [store.get(r, "a[0]") for r in (1, 2)] == [{"n": 1}, {"n": 2}]
    assert DirectoryStore(tmp_path).snapshots_of("a[0]") == [1, 2]


def _writer(root: str, key: str, name: str, n: int, conn: Any) -> None:
    store_segments.SEGMENT_BYTES = 1 << 30  # the owner's size goes with the store's key
    store = DirectoryStore.shared(root, key)
    assert store is not None
    for ref in range(1, n + 1):
        conn.send((ref, *store.write_pending(ref, name, {"ref": ref, "pad": "y" * 200})))
    conn.send(None)
    conn.close()


@pytest.mark.parametrize("compact", [False, True])
def test_writers_in_other_processes_roll_over_while_the_owner_adopts_and_deletes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compact: bool) -> None:
    import multiprocessing

    if compact:  # the owner writes its catalog anew every few dozen changes meanwhile
        monkeypatch.setattr(store_segments, "COMPACT_BYTES", 3_000)
    monkeypatch.setattr(store_segments, "SEGMENT_BYTES", 2_000)  # every writer's, often
    ctx = multiprocessing.get_context("fork")
    store = DirectoryStore(tmp_path)
    reader = DirectoryStore.shared(str(tmp_path), store.key())
    assert reader is not None
    pipes, procs = [], []
    for name in ("a[0]", "b[0]"):
        mine, theirs = ctx.Pipe()
        proc = ctx.Process(target=_writer, args=(str(tmp_path), store.key(), name, 150,
                                                 theirs))
        proc.start()
        pipes.append((name, mine))
        procs.append(proc)
    rolled: dict[str, int] = {}  # each writer's newest segment number
    for name, conn in pipes:
        while (got := conn.recv()) is not None:
            ref, pending, size = got
            rolled[name] = max(rolled.get(name, 0), int(pending.split("-")[1][:6]))
            store.adopt(ref, name, pending, size)
            store.delete(ref - 1, name)  # as none's source: only the newest offset counts
            if ref % 25 == 0:  # another process reads what the owner just cataloged
                assert reader.get(ref, name)["ref"] == ref
    for proc in procs:
        proc.join(timeout=30)
        assert proc.exitcode == 0
    assert [store.snapshots_of(n) for n, _ in pipes] == [[150], [150]]
    assert [reader.get(150, n)["ref"] for n, _ in pipes] == [150, 150]
    # about 9 objects a segment, 17 segments each; what is left: each writer's newest
    assert min(rolled.values()) >= 10
    assert len(_segments(tmp_path)) == 2
    catalog = (tmp_path / "catalog").stat().st_size
    assert catalog < 3_000 * 4 if compact else catalog > 20_000


def test_a_long_catalog_is_written_anew_and_every_reader_follows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A source commits an offset before every batch: a catalog line each, one part live.
    monkeypatch.setattr(store_segments, "COMPACT_BYTES", 2_000)
    monkeypatch.setattr(store_segments, "SEGMENT_BYTES", 1_000)
    store = DirectoryStore(tmp_path)
    early = DirectoryStore.shared(str(tmp_path), store.key())
    assert early is not None
    for ref in range(1, 400):
        store.put(ref, "src[0]", {"offset": ref, "pad": "z" * 100})
        store.delete(ref - 1, "src[0]")
        store.put(ref, "out[0]", {"ref": ref})
        if ref - 3 > 1:
            store.delete(ref - 3, "out[0]")  # the first and the last three kept
        if ref % 37 == 0:  # a reader that replayed an older generation goes on right
            assert early.snapshots_of("src[0]") == [ref]
            assert early.get(ref, "src[0]")["offset"] == ref
    size = (tmp_path / "catalog").stat().st_size
    assert size < 2_000 + 100, size  # some 1,600 changes: over 90 KB as a plain log
    assert store._generation > 20
    late = DirectoryStore.shared(str(tmp_path), store.key())
    again = DirectoryStore(tmp_path)
    for seen in (store, early, late, again):
        assert seen.snapshots_of("src[0]") == [399]
        assert seen.snapshots_of("out[0]") == [1, 397, 398, 399]
        assert seen.get(399, "src[0]")["offset"] == 399
        assert seen.get(397, "out[0]") == {"ref": 397}
    # Only the first part left, in the first segment: the owner's close writes the
    # catalog anew, and the store opened again from it still knows how far the writer
    # got (a "w" line), so that segment, sealed, goes once its last part does.
    for ref in (397, 398, 399):
        store.delete(ref, "out[0]")
    store.delete(399, "src[0]")
    store.close()
    assert (tmp_path / "catalog").read_bytes().count(b"\n") == 3  # g, w, p
    reopened = DirectoryStore(tmp_path)
    first = reopened.locate(1, "out[0]")
    assert first is not None and first.segment in _segments(tmp_path)
    reopened.delete(1, "out[0]")
    assert first.segment not in _segments(tmp_path)


class _NoMove(_NoAppend):
    """A local folder whose renames fail while ``refuse`` is set (appends work)."""

    refuse = True

    def move(self, src: str, dest: str) -> None:
        if self.refuse:
            raise OSError("read-only file system")
        self.fs.move(src, dest)

    def open_append_stream(self, path: str, metadata: Any) -> Any:
        return self.fs.open_append_stream(path)


def test_a_catalog_that_cannot_be_written_anew_goes_on_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Writing it anew only spares readers a longer replay: a store that refuses the new
    # file must not fail the write that set it off, nor lose a line.
    monkeypatch.setattr(store_segments, "COMPACT_BYTES", 1_000)
    store = DirectoryStore(tmp_path)
    handler = _NoMove()
    store.fs = pafs.PyFileSystem(handler)
    for ref in range(1, 40):
        store.put(ref, "src[0]", {"offset": ref})
        store.delete(ref - 1, "src[0]")
    assert store._generation == 0 and not (tmp_path / "catalog.new").exists()
    assert DirectoryStore(tmp_path).snapshots_of("src[0]") == [39]
    handler.refuse = False
    for ref in range(40, 200):
        store.put(ref, "src[0]", {"offset": ref})
        store.delete(ref - 1, "src[0]")
    assert store._generation >= 1 and DirectoryStore(tmp_path).snapshots_of("src[0]") == [199]
