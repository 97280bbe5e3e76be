"""The Nexmark generator builds a full event stream column-wise (every row a bid first,
then the persons and auctions put in); with a kind left out or padding it takes the
per-event loop. Both must give the same records, so the column-wise stream is checked
against the loop's, one kind at a time."""

from __future__ import annotations

from typing import Any

import pytest

from ftctl.runtime.nexmark import DEFAULTS, make_nexmark

pytestmark = pytest.mark.sim

SMALL = {"active_people": 3, "in_flight_auctions": 2, "categories": 2, "event_rate": 7}


@pytest.mark.parametrize("params", [{}, SMALL], ids=["defaults", "small"])
@pytest.mark.parametrize("seed", [1, 9])
@pytest.mark.parametrize("lo, hi, index, step", [(0, 2000, 0, 1), (37, 1037, 2, 4),
                                                 (123_456, 124_000, 3, 4), (5, 6, 0, 1),
                                                 (6, 6, 0, 1)])
def test_column_wise_stream_is_the_per_event_one(params: dict[str, Any], seed: int, lo: int,
                                                 hi: int, index: int, step: int) -> None:
    full = make_nexmark(seed, {**DEFAULTS, **params})(lo, hi, index, step)  # type: ignore[call-arg]
    by_kind = [make_nexmark(seed, {**DEFAULTS, **params, "kinds": k})(lo, hi, index, step)  # type: ignore[call-arg]
               for k in "PAB"]
    assert full == sorted((r for part in by_kind for r in part), key=lambda r: r[0])
    assert len(full) == max(0, hi - lo)
    assert {r[1][0] for r in full} <= set("PAB")
    # Plain Python values, as the loop makes them (numpy scalars would encode otherwise).
    assert all(type(x) in (int, str) for r in full for x in (r[0], r[2], *r[1]))
