"""The driver's allocator controls: arenas capped, freed heap pages handed back."""

from __future__ import annotations

import ctypes

import psutil
import pytest

from ftctl.spark import allocator

glibc = pytest.mark.skipif(allocator._libc() is None, reason="the C library is not glibc")

CHUNK = 64 * 1024  # below the mmap threshold: served from the heap
CHUNKS = 1600  # 100 MiB


@glibc
def test_trim_returns_freed_pages_pinned_under_a_live_top_chunk() -> None:
    libc = allocator._libc()
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    proc = psutil.Process()
    ptrs = [libc.malloc(CHUNK) for _ in range(CHUNKS)]
    for p in ptrs:
        ctypes.memset(p, 1, CHUNK)  # resident
    # Free all but the last: the heap's top stays in use, so free() alone keeps the pages.
    for p in ptrs[:-1]:
        libc.free(p)
    before = proc.memory_info().rss
    assert allocator.trim()
    released = before - proc.memory_info().rss
    libc.free(ptrs[-1])
    assert released > 0.8 * CHUNK * (CHUNKS - 1), released


@glibc
def test_cap_arenas_is_accepted() -> None:
    assert allocator.cap_arenas()


def test_trimmer_trims_once_per_period(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(allocator, "trim", lambda: calls.append(1) or True)
    t = allocator.Trimmer(every=60.0)
    start = t.due - 60.0
    assert not t.tick(start + 59.0)
    assert t.tick(start + 60.0)
    assert not t.tick(start + 100.0)
    assert t.tick(start + 121.0)
    assert (len(calls), t.trims) == (2, 2)
