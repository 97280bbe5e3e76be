"""Per-operator persistence policies (Fig. 1 and spec §2) and what each one costs.

=============  ========  ==========================================  ====================
policy         for       persists at completion of epoch t            restorable after a crash
=============  ========  ==========================================  ====================
``ephemeral``  stateless nothing (reports completion only)            any completed epoch
``log``        stateless its output of t (a firewall)                 any logged epoch
``batch``      stateful  nothing                                      only the empty state
``lazy:k``     stateful  its state when ``t mod k = k-1``             checkpointed epochs
``eager``      stateful  its state every epoch (``lazy:1``)           every epoch
``…+log``      stateful  also its output of t                         checkpoints, as a firewall
=============  ========  ==========================================  ====================

Sources and sinks have implicit policies (``source``: replayable input; ``sink``:
idempotent commit per epoch) and take none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    EPHEMERAL = "ephemeral"
    LOG = "log"
    BATCH = "batch"
    LAZY = "lazy"
    EAGER = "eager"
    SOURCE = "source"
    SINK = "sink"


STATELESS_KINDS = frozenset({Kind.EPHEMERAL, Kind.LOG})
STATEFUL_KINDS = frozenset({Kind.BATCH, Kind.LAZY, Kind.EAGER})

_SYNTAX = re.compile(r"^(ephemeral|log|batch|eager|lazy:(\d+))(\+log)?$")


class PolicyError(ValueError):
    """A policy string that does not parse."""


@dataclass(frozen=True, slots=True)
class Policy:
    kind: Kind
    every: int = 0  # lazy:k's k (eager: 1)
    logs: bool = False  # logs its outputs: a firewall (spec §4.1 of the paper)

    @classmethod
    def parse(cls, text: str) -> Policy:
        m = _SYNTAX.match(text.strip())
        if not m:
            raise PolicyError(
                f"unknown policy {text!r} (ephemeral, log, batch, lazy:K, eager, "
                "and +log after a stateful one)")
        base, k, plus = m.group(1), m.group(2), bool(m.group(3))
        if k is not None:
            if int(k) < 1:
                raise PolicyError(f"lazy:K needs K >= 1, got {text!r}")
            return cls(Kind.LAZY, int(k), plus)
        kind = Kind(base)
        if plus and kind in STATELESS_KINDS:
            raise PolicyError(f"+log applies to a stateful policy, got {text!r}")
        return cls(kind, 1 if kind is Kind.EAGER else 0, plus or kind is Kind.LOG)

    def __str__(self) -> str:
        if self.kind in (Kind.SOURCE, Kind.SINK, Kind.EPHEMERAL, Kind.LOG):
            return self.kind.value
        base = f"lazy:{self.every}" if self.kind is Kind.LAZY else self.kind.value
        return base + ("+log" if self.logs else "")

    @property
    def stateful(self) -> bool:
        return self.kind in STATEFUL_KINDS

    @property
    def stateless(self) -> bool:
        return self.kind in STATELESS_KINDS

    def checkpoints(self, t: int, offset: int = 0) -> bool:
        """Whether a stateful instance persists its state at completion of epoch ``t``
        (``offset`` staggers instances, spec D4)."""
        if self.kind in (Kind.LAZY, Kind.EAGER):
            return (t + offset) % self.every == self.every - 1
        return False

    def restorable(self, t: int, offset: int = 0) -> bool:
        """Whether completing ``t`` adds ``↓t`` to F* (after its report arrives)."""
        if self.kind in (Kind.EPHEMERAL, Kind.LOG, Kind.SINK):
            return True
        return self.checkpoints(t, offset)


SOURCE = Policy(Kind.SOURCE, logs=True)  # its log is the replayable input (spec D8)
SINK = Policy(Kind.SINK)
