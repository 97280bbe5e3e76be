"""Message accounting behind the paper's Table 1 (§6.1, §6.2).

Setup of Table 1: two operators with equal replication factor R, no failures, one tuple
record per tuple. Per tuple a replica receives, it sends R-1 ``record`` and R-1 ``purge``
messages to its colleagues, one ``ack`` back, one ``delete`` to the origin and one ``data``
downstream.

The paper's two cells, 400 (R=2) and 2400 (R=4), have ratio 6. Any count of the form
n(aR + b) with a tuple count n independent of R has ratio (4a+b)/(2a+b) <= 2, so the
workload must grow with R and the counted messages must be pure colleague traffic: with
N tuples per first-operator replica (N*R tuples through each operator),

    M(R) = O * N * R * (R - 1),    N = 100, O = 2:   M(2) = 400,  M(4) = 2400.

ftctl counts ``record`` messages with N = 100 (``record + purge`` with N = 50 fits equally).
The per-tuple form of §6.1, (R - 1 + 1 + 1) * O, cannot give both cells for any fixed tuple
count.
"""

from __future__ import annotations

from protocols.contract.spec import Guarantee

PAPER_TABLE1: dict[int, int] = {2: 400, 4: 2400}
TABLE1_N = 100  # tuples per first-operator replica
TABLE1_O = 2  # operators with a ring
KINDS = ("data", "ack", "delete", "record", "purge")


def table1_messages(r: int, n: int = TABLE1_N, o: int = TABLE1_O) -> int:
    """Table 1's figure: ``record`` messages of a failure-free run."""
    return o * n * r * (r - 1)


def tuples_through(r: int, n: int = TABLE1_N) -> int:
    """Tuples through each operator: N per first-operator replica."""
    return n * r


def per_tuple(r: int, o: int = TABLE1_O,
              semantics: Guarantee = Guarantee.EXACTLY_ONCE) -> dict[str, int]:
    """Messages per source tuple, by kind, failure-free.

    At-most-once sends only data; at-least-once and exactly-once add an ack, a delete, and
    R-1 records and R-1 purges per operator.
    """
    if semantics is Guarantee.AT_MOST_ONCE:
        return {"data": o, "ack": 0, "delete": 0, "record": 0, "purge": 0}
    return {"data": o, "ack": o, "delete": o, "record": o * (r - 1), "purge": o * (r - 1)}


def totals(r: int, n: int = TABLE1_N, o: int = TABLE1_O,
           semantics: Guarantee = Guarantee.EXACTLY_ONCE) -> dict[str, int]:
    """Messages of a failure-free run with N*R tuples, by kind."""
    return {k: v * tuples_through(r, n) for k, v in per_tuple(r, o, semantics).items()}


def paper_per_tuple(r: int, o: int = TABLE1_O) -> int:
    """§6.1's per-tuple data cost in record-sized units: (R - 1 + 1 + 1) * O."""
    return (r + 1) * o
