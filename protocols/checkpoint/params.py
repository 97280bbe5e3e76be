"""``checkpoint``'s parameters: the snapshot interval, the alignment mode and how many
complete snapshots the store keeps."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from protocols.contract.params import ProtocolParams, RunShape

CLUSTER_INTERVAL = 1.0  # seconds between snapshots on a cluster when interval is "auto"


class CheckpointParams(ProtocolParams):
    """``--param`` keys of ``checkpoint``."""

    interval: Annotated[float, Field(gt=0)] | Literal["auto"] = Field(
        default="auto", description="Seconds between snapshot tokens at the sources; auto: "
        f"{CLUSTER_INTERVAL:g} s on a cluster, an eighth of the run in simulation (so every "
        "simulated run takes several snapshots whatever its length).")
    alignment: Literal["unaligned", "aligned"] = Field(
        default="unaligned", description="unaligned: Noir's snapshots with channel state; "
        "aligned: Flink's barrier alignment.")
    keep: Annotated[int, Field(ge=1)] = Field(
        default=2, description="Complete snapshots kept in the store: once a newer one "
        "completes, older ones are deleted. Aligned, a snapshot found damaged falls back "
        "to an older kept one, past them to the initial state (the whole input again); "
        "unaligned, only the newest is ever read.")

    def for_run(self, shape: RunShape) -> CheckpointParams:
        if self.interval != "auto":
            return self
        return self.model_copy(update={"interval": shape.period(CLUSTER_INTERVAL)})

    def seconds(self) -> float:
        """The interval of a resolved run (``for_run`` replaced ``"auto"``)."""
        if self.interval == "auto":
            raise ValueError("checkpoint interval not resolved for the run")
        return self.interval
