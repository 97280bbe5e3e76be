"""Spark SQL oracles of Nexmark Q0-Q8, written from the query definitions alone.

They share nothing with the runtime but the generator: each regenerates the events as
rows with every column a kind may have (nulls elsewhere) and computes the query with
joins, windows as ``explode(sequence(...))`` and integer ``DIV``/``pmod``, so an operator
bug (a window that fires early, a join that loses a pair) shows as a mismatch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ftctl.runtime.records import Record

if TYPE_CHECKING:
    from ftctl.verify.oracle import Oracle

SCHEMA = (
    "e long, kind string, ts long, id long, name string, city string, state string, "
    "seller long, category long, initial_bid long, reserve long, expires long, "
    "auction long, bidder long, price long, channel string"
)
# Views over the one input frame, one per kind.
VIEWS = (
    "WITH person AS (SELECT * FROM {input} WHERE kind = 'P'),"
    " auction AS (SELECT * FROM {input} WHERE kind = 'A'),"
    " bid AS (SELECT * FROM {input} WHERE kind = 'B'),"
    " winning AS (SELECT A.id, A.seller, A.category, A.expires, max(B.price) AS final"
    "  FROM auction A JOIN bid B ON B.auction = A.id AND B.ts >= A.ts"
    "  AND B.ts < A.expires AND B.price >= A.reserve"
    "  GROUP BY A.id, A.seller, A.category, A.expires) "
)


def nexmark_row(record: Record) -> tuple[Any, ...]:
    e, v, ts = record
    if v[0] == "P":
        return (e, "P", ts, v[1], v[2], v[3], v[4], *[None] * 9)
    if v[0] == "A":
        return (e, "A", ts, v[1], None, None, None, v[2], v[3], v[4], v[5], v[7],
                None, None, None, None)
    return (e, "B", ts, *[None] * 9, v[1], v[2], v[3], v[4])


def _event(r: Any) -> tuple[Any, ...]:
    if r["kind"] == "P":
        return ("P", r["id"], r["name"], r["city"], r["state"], r["ts"])
    if r["kind"] == "A":
        return ("A", r["id"], r["seller"], r["category"], r["initial_bid"], r["reserve"],
                r["ts"], r["expires"])
    return ("B", r["auction"], r["bidder"], r["price"], r["channel"], r["ts"])


def _cols(*names: str) -> Any:
    return lambda r: tuple(r[n] for n in names)


def _winners(end: str) -> Any:
    return lambda r: (r[end], (r["best"], tuple(tuple(w) for w in r["winners"])))


QUERIES: dict[str, tuple[str, str, Any, str]] = {
    # name: (description, query after the views, value hook, final)
    "q0": ("every event", "SELECT e AS key, * FROM {input}", _event, "unique"),
    "q1": ("bids in euros",
           "SELECT e AS key, auction, bidder, price * 908 DIV 1000 AS euro, ts FROM bid",
           _cols("auction", "bidder", "euro", "ts"), "unique"),
    "q2": ("bids on auctions whose id is a multiple of 123",
           "SELECT e AS key, auction, price FROM bid WHERE pmod(auction, 123) = 0",
           _cols("auction", "price"), "unique"),
    "q3": ("local sellers' auctions in category 10",
           "SELECT A.id AS key, P.name, P.city, P.state, A.id FROM person P JOIN auction A"
           " ON A.seller = P.id WHERE P.state IN ('OR', 'ID', 'CA') AND A.category = 10",
           _cols("name", "city", "state", "id"), "unique"),
    "q4": ("(sum, count) of winning prices per category",
           "SELECT category AS key, sum(final) AS s, count(*) AS n FROM winning"
           " GROUP BY category", _cols("s", "n"), "last"),
    "q5": ("per sliding window, the auctions with the most bids",
           "SELECT c.wend AS key, m.best, sort_array(collect_list(struct(c.auction, c.n)))"
           " AS winners FROM (SELECT s + 10000 AS wend, auction, count(*) AS n FROM"
           " (SELECT auction, explode(sequence(ts - pmod(ts, 2000), ts - 9999, -2000)) AS s"
           " FROM bid) GROUP BY s, auction) c JOIN (SELECT wend, max(n) AS best FROM"
           " (SELECT s + 10000 AS wend, auction, count(*) AS n FROM (SELECT auction,"
           " explode(sequence(ts - pmod(ts, 2000), ts - 9999, -2000)) AS s FROM bid)"
           " GROUP BY s, auction) GROUP BY wend) m ON c.wend = m.wend AND c.n = m.best"
           " GROUP BY c.wend, m.best", _winners("key"), "last"),
    "q6": ("(sum, count) of each seller's last 10 winning prices",
           "SELECT seller AS key, sum(final) AS s, count(*) AS n FROM (SELECT seller, final,"
           " row_number() OVER (PARTITION BY seller ORDER BY expires DESC, id DESC) AS rn"
           " FROM winning) WHERE rn <= 10 GROUP BY seller", _cols("s", "n"), "last"),
    "q7": ("per tumbling window, the highest bids",
           "SELECT b.w AS key, b.w + 10000 AS wend, m.best, sort_array(collect_list("
           "struct(b.auction, b.bidder, b.price))) AS winners FROM (SELECT *, ts - pmod(ts,"
           " 10000) AS w FROM bid) b JOIN (SELECT ts - pmod(ts, 10000) AS w, max(price) AS"
           " best FROM bid GROUP BY ts - pmod(ts, 10000)) m ON b.w = m.w AND b.price ="
           " m.best GROUP BY b.w, m.best", _winners("wend"), "last"),
    "q8": ("persons who opened an auction in the window they registered in",
           "SELECT A.id AS key, P.id AS pid, P.name, A.reserve, A.ts - pmod(A.ts, 10000)"
           " + 10000 AS wend FROM person P JOIN auction A ON A.seller = P.id AND"
           " P.ts - pmod(P.ts, 10000) = A.ts - pmod(A.ts, 10000)",
           _cols("pid", "name", "reserve", "wend"), "unique"),
}


def nexmark_oracles() -> dict[str, Oracle]:
    from ftctl.verify.oracle import Oracle

    return {
        f"nexmark-{q}": Oracle(
            name=f"nexmark-{q}", description=f"Nexmark {q.upper()}: {desc}",
            source="source.nexmark", row=nexmark_row, schema=SCHEMA,
            query=VIEWS + query, final=final,  # type: ignore[arg-type]
            value=value)
        for q, (desc, query, value, final) in QUERIES.items()
    }
