"""The snapshot directory store: what tasks on the coordinator's machine rely on."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftctl.store import DirectoryStore


def test_a_store_made_from_a_relative_path_is_found_from_another_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The driver names the store relative to its working directory; a Spark task runs in
    # the executor's, and must still find it (else every blob crosses the control link).
    monkeypatch.chdir(tmp_path)
    store = DirectoryStore(Path("results/run/snapshots"))
    key = store.key()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    writer = DirectoryStore.shared(str(store.root), key)
    assert writer is not None
    name, size = writer.write_pending(3, "out[0]", {"output": [("a", 1)]})
    store.adopt(3, "out[0]", name, size)
    assert store.get(3, "out[0]") == {"output": [("a", 1)]}
    assert store.snapshots_of("out[0]") == [3]


def test_a_store_with_another_key_is_not_shared(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "snapshots")
    store.key()
    assert DirectoryStore.shared(str(store.root), "not-the-key") is None
    assert DirectoryStore.shared(str(tmp_path / "missing"), store.key()) is None
