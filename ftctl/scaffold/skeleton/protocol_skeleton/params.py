"""The protocol's parameters: ``--param snapshot_every=4`` on the command line."""

from __future__ import annotations

from pydantic import Field

from protocols.contract import ProtocolParams


class Params(ProtocolParams):
    snapshot_every: int = Field(
        8, ge=1, description="Input batches an instance processes between two snapshots "
        "(a source: batches it produces). Fewer: more writes, shorter replays.")
