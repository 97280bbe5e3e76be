"""``--param`` keys of ``causal``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from protocols.contract.params import ProtocolParams


class CausalParams(ProtocolParams):
    """``--param`` keys of ``causal``."""

    depth: int = Field(default=2, ge=1, description="f, the adjacent failures recovered "
                       "locally: diffs keep depth + 1 levels below the root; a failed "
                       "component with a longer path falls back to a whole-graph restart.")
    snapshot_every: int = Field(default=10, ge=1, description="Processed batches per "
                                "input channel between two local snapshots.")
    snapshot_balance: float = Field(
        default=1.0, ge=0, description="A stateful operator's next local snapshot also "
        "waits until it has processed this many times as many records (and events) as "
        "its state held entries at the last one, so that snapshotting a large state costs "
        "about what processing does; 0: every snapshot_every batches per input alone.")
    clocks: Literal["on", "off"] = Field(default="on", description="off: no diffs are "
                                         "piggybacked or logged (measures what clocks "
                                         "cost); every failure takes the fallback.")
