"""The conformance kit's clock cases: crashes with the clock faults a protocol tolerates.

Each protocol runs its first variant on one topology (wordcount where it can, as the
phase-triggered cases), at each of its timings, over schedules drawing crashes and the
clock kinds of ``tolerated_clock_kinds``. Besides the guarantee, those runs are judged on
false suspicions (``ftctl/sim/suspicions.py``): no live unit suspected, fenced or taken
over. ``ftctl sim --faults`` draws the clock kinds the same way, so a broken case replays.

What a protocol tolerates is what docs/chaos.md ("What each protocol tolerates") states:
a protocol whose timers only pace (snapshots, punctuations, resends) tolerates every
clock fault; one that decides liveness by time (``DETECTORS``: replica-ring's pings,
judged on the pinger's own clock) tolerates a stall of any length and a drift ``r`` while
``r x RTT < T``, but a forward step of its clock only when shorter than its timeout less
a round trip. The simulation's draw of a jump or a skew can step a clock forward by tens
of milliseconds (``FORWARD_STEPPING``), past the 6 ms timeout of the short timings, so
the kit draws neither for such a protocol; unit tests keep a skew from the start and
backward jumps (tests/test_sim_clock_faults.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ftctl.conformance.cases import (
    BUNDLED_TOPOLOGIES,
    MAX_SIM_RECORDS,
    PHASE_TOPOLOGY,
    GuaranteeCase,
    guarantee_cases,
    variants_of,
)
from ftctl.sim.clock_faults import DRIFT_RATES, FORWARD_STEPPING
from ftctl.sim.faults import CRASH_ONLY, NET_DELAY, FaultKind
from protocols.registry import get_protocol

CLOCK_KINDS: tuple[FaultKind, ...] = ("clock-skew", "clock-drift", "clock-jump", "clock-stall")
# A protocol deciding liveness by the readings of one unit's clock: the params of its
# ping period and timeout.
DETECTORS: dict[str, tuple[str, str]] = {"replica-ring": ("ping_every", "ping_timeout")}
# The longest round trip of a ping on the simulated network: each way 0.2-2.2 x
# NET_DELAY (ftctl/sim/ports.py).
RTT_MAX = 2 * 2.2 * NET_DELAY


def tolerated_clock_kinds(protocol: str, params: Mapping[str, Any]) -> tuple[FaultKind, ...]:
    """The clock kinds whose every draw ``protocol`` (or ``protocol/mutant``) with
    ``params`` tolerates: all of them for a protocol that decides nothing by time."""
    spec = get_protocol(protocol.partition("/")[0])
    detector = DETECTORS.get(spec.name)
    if detector is None:
        return CLOCK_KINDS
    resolved = spec.params.model_validate(dict(params))
    every, timeout = (float(getattr(resolved, k)) for k in detector)
    period = math.ceil(timeout / every - 1e-9) * every  # the first tick past the deadline
    drift_ok = DRIFT_RATES[1] * RTT_MAX < period
    return tuple(k for k in CLOCK_KINDS if k not in FORWARD_STEPPING
                 and (k != "clock-drift" or drift_ok))


def clock_cases(protocol: str, directory: Path = BUNDLED_TOPOLOGIES,
                max_records: int = MAX_SIM_RECORDS) -> list[GuaranteeCase]:
    """One case per timing of ``protocol``: its first variant on wordcount (else the first
    topology it accepts), drawing crashes and its tolerated clock kinds."""
    first = variants_of(protocol)[0]
    out = []
    by_timing: dict[tuple[tuple[str, Any], ...], list[GuaranteeCase]] = {}
    for c in guarantee_cases(protocol, directory, max_records):
        if c.variant == first:
            by_timing.setdefault(c.timings, []).append(c)
    for cases in by_timing.values():
        base = next((c for c in cases if c.topology.stem == PHASE_TOPOLOGY), cases[0])
        out.append(replace(base, kinds=CRASH_ONLY + tolerated_clock_kinds(protocol,
                                                                          base.params)))
    return out
