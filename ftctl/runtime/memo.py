"""Batches that every run of one graph makes alike, made once per process.

A simulator runs the same topology, on the same input, hundreds of times. A source's
batch is a pure function of its offsets, a built-in stateless operator's output a pure
function of its input batch, and a hash split a pure function of the batch and the
channels; at Nexmark size (a million events a run) making them again was a third of a
schedule. ``BatchMemo`` keeps them: a source batch under its (instance, start, end), and
what pure work made of a kept batch under (who did it, the batch). Only batches the memo
itself made or kept are looked up (by identity: it holds every one, so an ``id`` is never
reused for another while it lives); the output of anything else (a stateful operator, a
user's function, a batch a protocol rebuilt) is made as before and not kept, so the memo
grows with the input, never with the number of runs.

Record lists are never changed once made (the runtime shares them between channels
already), so handing the same list to every run changes nothing a run does. The lists
it holds are ``Shared`` (``ftctl.runtime.shared_records``): a snapshot or payload log
encoded in this process refers to them instead of copying their records. A graph has
no memo unless its owner gives it one (``Simulator``): a single golden run keeps its
memory bounded (``ftctl.sim.golden``'s spill).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ftctl.runtime.records import Record
from ftctl.runtime.shared_records import shared

# Past this many records kept, batches are made as without a memo: a bound on its memory
# (about 300 bytes a Nexmark event) for inputs larger than the bundled ones.
MAX_KEPT = 4_000_000


class BatchMemo:
    def __init__(self, max_kept: int = MAX_KEPT) -> None:
        self.max_kept = max_kept
        self.kept = 0  # records in the lists held
        self._sources: dict[tuple[str, int, int], list[Record]] = {}
        self._derived: dict[tuple[str, int], Any] = {}
        self._held: dict[int, list[Record]] = {}  # id -> every list the memo made or kept
        self.hits = 0

    def source(self, iid: str, lo: int, hi: int,
               make: Callable[[int, int], list[Record]]) -> list[Record]:
        """Source ``iid``'s records for offsets [lo, hi)."""
        key = (iid, lo, hi)
        got = self._sources.get(key)
        if got is not None:
            self.hits += 1
            return got
        made = make(lo, hi)
        if self._fits(made):
            made = self._hold(made)
            self._sources[key] = made
        return made

    def derive(self, who: str, records: list[Record],
               make: Callable[[list[Record]], Any]) -> Any:
        """``make(records)``, once per ``who`` and kept batch; ``who`` names the pure work
        (an operator, a split onto given channels), ``make`` returns a record list or a
        dict of them."""
        if self._held.get(id(records)) is not records:
            return make(records)
        key = (who, id(records))
        got = self._derived.get(key)
        if got is not None:
            self.hits += 1
            return got
        made = make(records)
        lists: list[list[Record]] = list(made.values()) if isinstance(made, dict) else [made]
        if self._fits(*lists):
            made = ({k: self._hold(v) for k, v in made.items()} if isinstance(made, dict)
                    else self._hold(made))
            self._derived[key] = made
        return made

    def _fits(self, *lists: list[Record]) -> bool:
        """Whether the memo has room for those of ``lists`` it does not hold yet."""
        new = sum(len(x) for x in lists if self._held.get(id(x)) is not x)
        return self.kept + new <= self.max_kept

    def _hold(self, records: list[Record]) -> list[Record]:
        """The list the memo holds for ``records``: ``records`` itself if held already,
        else a ``Shared`` copy (a snapshot refers to it rather than copying its records,
        ``ftctl.codec``), held from now on."""
        if self._held.get(id(records)) is records:
            return records
        kept = shared(records)
        self._held[id(kept)] = kept
        self.kept += len(kept)
        return kept
