"""Nexmark: the auction benchmark's seeded generator, its query functions and operator.

Event ``e`` is a pure function of (seed, e, params), like every ftctl source, so any
offset can be regenerated for replay, the golden run and the oracle. The rules follow
the public Nexmark generator (kinds 1:3:46, dense ids, hot sellers/auctions/bidders,
auctions expiring within a horizon) with two exact-integer stand-ins so numpy, Python and
Spark agree: splitmix64 draws ``mix(seed, e*8 + k)`` and a decade-log-uniform integer
price. A record is ``(e, value, ts)`` with value a tagged tuple:

- Person  ("P", id, name, city, state, date_time)
- Auction ("A", id, seller, category, initial_bid, reserve, date_time, expires)
- Bid     ("B", auction, bidder, price, channel, date_time)
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import repeat
from typing import Any

from ftctl.runtime.records import Record, typed

FIRST_NAMES = ("peter", "paul", "luke", "john", "saul", "vicky", "kate", "julie",
               "sarah", "deiter", "walter")
LAST_NAMES = ("shultz", "abrams", "spencer", "white", "bartels", "walton", "smith",
              "jones", "noris")
CITIES = ("phoenix", "los angeles", "san francisco", "boise", "portland", "bend",
          "redmond", "seattle", "kent", "cheyenne")
STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
CHANNELS = ("Google", "Facebook", "Baidu", "Apple")

# Nexmark's proportions per 50 events; the query thresholds assume them.
PERSONS, AUCTIONS, BIDS = 1, 3, 46
TOTAL = PERSONS + AUCTIONS + BIDS
FIRST_ID = 1000
FIRST_CATEGORY = 10
HOT_GROUP = 100
ID_LEAD = 10
DRAWS = 8  # draw slots per event: counter = e * DRAWS + k
KINDS = "PAB"

DEFAULTS: dict[str, Any] = {
    "event_rate": 10_000,
    "in_flight_auctions": 100,
    "active_people": 1000,
    "categories": 5,
    "pad_bytes": 0,
    "kinds": "PAB",
}


def check(p: dict[str, Any]) -> None:
    """ValueError for a param out of its bounds."""
    for name in ("event_rate", "in_flight_auctions", "active_people", "categories"):
        if int(p[name]) < 1 or int(p[name]) > 10**9:
            raise ValueError(f"{name} must be between 1 and 10**9, got {p[name]}")
    if not 0 <= int(p["pad_bytes"]) <= 100_000:
        raise ValueError(f"pad_bytes must be between 0 and 100000, got {p['pad_bytes']}")
    kinds = str(p["kinds"])
    if not kinds or set(kinds) - set("PAB"):
        raise ValueError(f"kinds must be a non-empty subset of 'PAB', got {kinds!r}")


def make_nexmark(seed: int, p: dict[str, Any]) -> Callable[[int, int], list[Record]]:
    """``gen(start, end)``: events [start, end) in event-number order."""
    import numpy as np  # here, not at import: validation never generates records

    from ftctl.runtime.sources import mix  # sources imports this module for its registry

    rate = int(p["event_rate"])
    in_flight, active_people = int(p["in_flight_auctions"]), int(p["active_people"])
    categories = int(p["categories"])
    pad = "x" * int(p["pad_bytes"])
    keep = set(str(p["kinds"]))
    span = in_flight * TOTAL // AUCTIONS
    u = np.uint64

    def gen(start: int, end: int, index: int = 0, step: int = 1) -> list[Record]:
        """Events index + j * step for j in [start, end) (step 1: events [start, end))."""
        if end <= start:
            return []
        e = index + np.arange(start, end, dtype=np.int64) * step
        d = mix(seed, (e.astype(np.uint64)[:, None] * u(DRAWS)
                       + np.arange(DRAWS, dtype=np.uint64)[None, :]))
        epoch, off = np.divmod(e, TOTAL)
        last_person = epoch * PERSONS + np.minimum(off, PERSONS - 1)
        last_auction = np.where(
            off < PERSONS, (epoch - 1) * AUCTIONS + AUCTIONS - 1,
            np.where(off >= PERSONS + AUCTIONS, epoch * AUCTIONS + AUCTIONS - 1,
                     epoch * AUCTIONS + off - PERSONS))
        ts = (e * 1000) // rate

        def draw_mod(k: int, n: Any) -> Any:
            return (d[:, k] % np.asarray(n).astype(np.uint64)).astype(np.int64)

        def price(k: int) -> Any:
            v = d[:, k]
            mant = (u(100_000) + (v // u(6)) % u(900_000)).astype(np.int64)
            return mant * (10 ** (v % u(6)).astype(np.int64)) // 1000

        people = last_person + 1
        active = np.minimum(people, active_people)
        hi_a = last_auction
        lo_a = np.maximum(hi_a - in_flight, 0)

        def next_person(k: int) -> Any:
            return people - active + draw_mod(k, active + ID_LEAD)

        def next_auction(k: int) -> Any:
            return lo_a + draw_mod(k, hi_a - lo_a + 1 + ID_LEAD)

        hot_person = (last_person // HOT_GROUP) * HOT_GROUP
        seller = np.where(draw_mod(0, 4) > 0, hot_person, next_person(1)) + FIRST_ID
        auction = np.where(draw_mod(0, 2) > 0, (last_auction // HOT_GROUP) * HOT_GROUP,
                           next_auction(1)) + FIRST_ID
        bidder = np.where(draw_mod(2, 4) > 0, hot_person + 1, next_person(3)) + FIRST_ID
        horizon = np.maximum(((e + span) * 1000) // rate - ts, 1)
        expires = ts + 1 + draw_mod(5, 2 * horizon)
        initial = price(3)
        price4 = price(4)
        if not pad and len(keep) == len(KINDS):
            return _assemble(e, off, ts, (auction, bidder, price4, draw_mod(5, len(CHANNELS))),
                             (last_person + FIRST_ID, draw_mod(0, len(FIRST_NAMES)),
                              draw_mod(1, len(LAST_NAMES)), draw_mod(2, len(CITIES)),
                              draw_mod(3, len(STATES))),
                             (last_auction + FIRST_ID, seller,
                              FIRST_CATEGORY + draw_mod(2, categories), initial, price4,
                              expires))
        cols = [c.tolist() for c in (
            e, off, ts, last_person + FIRST_ID, last_auction + FIRST_ID, seller,
            FIRST_CATEGORY + draw_mod(2, categories), initial, price4, expires, auction,
            bidder, draw_mod(0, len(FIRST_NAMES)), draw_mod(1, len(LAST_NAMES)),
            draw_mod(2, len(CITIES)), draw_mod(3, len(STATES)), draw_mod(5, len(CHANNELS)))]
        out: list[Record] = []
        for (ev, o, t, pid, aid, sel, cat, ini, p4, exp, auc, bid, fn, ln, ci, st,
             ch) in zip(*cols, strict=True):
            value: tuple[Any, ...]
            if o < PERSONS:
                if "P" not in keep:
                    continue
                value = ("P", pid, FIRST_NAMES[fn] + " " + LAST_NAMES[ln], CITIES[ci],
                         STATES[st], t)
            elif o < PERSONS + AUCTIONS:
                if "A" not in keep:
                    continue
                value = ("A", aid, sel, cat, ini, ini + p4, t, exp)
            else:
                if "B" not in keep:
                    continue
                value = ("B", auc, bid, p4, CHANNELS[ch], t)
            if pad:
                value = (*value, pad)
            out.append((ev, value, t))
        return out

    gen.strides = True  # type: ignore[attr-defined]
    return gen


def _assemble(e: Any, off: Any, ts: Any, bids: tuple[Any, ...], people: tuple[Any, ...],
              auctions: tuple[Any, ...]) -> list[Record]:
    """Every event's record (no kind left out, no padding), as the per-event loop of
    ``gen`` builds it, but mostly in C: bids are 46 of every 50 events, so every row is
    first made a bid from whole columns, then the few persons and auctions replace
    theirs. Same values, same shared strings."""
    import numpy as np

    t = ts.tolist()
    auction, bidder, price, channel = bids
    names = np.array(CHANNELS, dtype=object)[channel].tolist()
    values: list[tuple[Any, ...]] = list(zip(repeat("B"), auction.tolist(), bidder.tolist(),
                                             price.tolist(), names, t))
    rows = np.flatnonzero(off < PERSONS + AUCTIONS)
    if len(rows):
        kinds = off[rows].tolist()
        pid, fn, ln, ci, st = (c[rows].tolist() for c in people)
        aid, sel, cat, ini, p4, exp = (c[rows].tolist() for c in auctions)
        for j, i in enumerate(rows.tolist()):
            if kinds[j] < PERSONS:
                values[i] = ("P", pid[j], FIRST_NAMES[fn[j]] + " " + LAST_NAMES[ln[j]],
                             CITIES[ci[j]], STATES[st[j]], t[i])
            else:
                values[i] = ("A", aid[j], sel[j], cat[j], ini[j], ini[j] + p4[j], t[i],
                             exp[j])
    return list(zip(e.tolist(), values, t, strict=True))


# ---------------------------------------------------------------- query functions
# Each declares the record type it takes and makes (ftctl.runtime.records), so
# validation can check every edge and key_by/argmax can name fields.


@typed("nexmark.event", "nexmark.person")
def is_person(rec: Record) -> bool:
    return bool(rec[1][0] == "P")


@typed("nexmark.event", "nexmark.auction")
def is_auction(rec: Record) -> bool:
    return bool(rec[1][0] == "A")


@typed("nexmark.event", "nexmark.bid")
def is_bid(rec: Record) -> bool:
    return bool(rec[1][0] == "B")


@typed("nexmark.bid", "nexmark.q1")
def q1_euro(rec: Record) -> Record:
    e, b, ts = rec
    return (e, (b[1], b[2], b[3] * 908 // 1000, b[5]), ts)


@typed("nexmark.bid", "nexmark.bid")
def q2_select(rec: Record) -> bool:
    return bool(rec[1][1] % 123 == 0)


@typed("nexmark.bid", "nexmark.q2")
def q2_project(rec: Record) -> Record:
    e, b, ts = rec
    return (e, (b[1], b[3]), ts)


@typed("nexmark.event", "nexmark.person")
def q3_person(rec: Record) -> bool:
    v = rec[1]
    return bool(v[0] == "P" and v[4] in ("OR", "ID", "CA"))


@typed("nexmark.event", "nexmark.auction")
def q3_auction(rec: Record) -> bool:
    v = rec[1]
    return bool(v[0] == "A" and v[3] == 10)


@typed("pair", "nexmark.q3")
def q3_project(rec: Record) -> Record:
    _, (p, a), ts = rec
    return (a[1], (p[2], p[3], p[4], a[1]), ts)


@typed("nexmark.winning", "int")
def q4_by_category(rec: Record) -> Record:
    _, (_, category, price, _), ts = rec
    return (category, price, ts)


@typed("window", "nexmark.q5")
def q5_by_end(rec: Record) -> Record:
    auction, (end, count), ts = rec
    return (end, (auction, count), ts)


@typed("nexmark.winning", "nexmark.q6")
def q6_by_seller(rec: Record) -> Record:
    auction, (seller, _, price, _), ts = rec
    return (seller, (auction, price), ts)


@typed("nexmark.bid", "nexmark.q7")
def q7_project(rec: Record) -> Record:
    e, b, ts = rec
    return (e, (b[1], b[2], b[3]), ts)


@typed("pair", "nexmark.q8")
def q8_project(rec: Record) -> Record:
    _, (p, a), ts = rec
    return (a[1], (p[1], p[2], a[5], ts + 1), ts)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    f"nexmark.{fn.__name__}": fn
    for fn in (is_person, is_auction, is_bid, q1_euro, q2_select, q2_project, q3_person,
               q3_auction, q3_project, q4_by_category, q5_by_end, q6_by_seller,
               q7_project, q8_project)
}
