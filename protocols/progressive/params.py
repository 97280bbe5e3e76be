"""``--param`` keys of ``progressive`` (spec §4), validated; errors name the field."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from protocols.contract.params import ProtocolParams, RunShape
from protocols.contract.view import GraphView
from protocols.progressive.schedule import Fit, Leftover, Schedule


class ProgressiveParams(ProtocolParams):
    interval: float = Field(default=1.0, gt=0,
                            description="Seconds between punctuations P_k at each source.")
    mini_batch: int = Field(default=4, ge=1,
                            description="Source wire batches per recovery mini-batch (D11).")
    punct_every: int = Field(
        default=4, ge=1, description="In progressive mode a source's punctuation follows "
        "every punct_every-th mini-batch (positions fixed by offsets, so replays match).")
    schedule: Schedule = Field(
        default="profit-density",
        description="profit-density: whole queries by Eq. PD (the paper); topological: "
        "instances in execution order as slots come; blocking: all at once when all fit.")
    fit: Fit = Field(default="le", description="A query fits when cost <= free (le) or < (lt).")
    leftover: Leftover = Field(
        default="idle", description="Slots no whole query fits: left idle, or prefill the "
        "best query's instances.")
    burst_window: float = Field(default=10.0, gt=0,
                                description="Seconds over which lost nodes make a burst.")
    burst_threshold: int = Field(
        default=1, ge=0, description="A burst is more than this many nodes lost in the window.")
    burst_unit: Literal["nodes", "instances"] = Field(
        default="nodes", description="What counts as lost: nodes, or every failed instance.")
    priorities: dict[str, float] = Field(
        default_factory=dict,
        description="Per query (sink operator) priority, overriding the topology's.")

    @field_validator("priorities")
    @classmethod
    def _positive(cls, v: dict[str, float]) -> dict[str, float]:
        for sink, prt in v.items():
            if not prt > 0:
                raise ValueError(f"priority of {sink!r} must be > 0, got {prt!r}")
        return v

    def for_run(self, shape: RunShape) -> ProgressiveParams:
        """In simulation, a punctuation interval and burst window not given scale with the
        run (spec §5: ``burst_window`` like ``interval``): the defaults' 1 s and 10 s
        become an eighth of the run and ten times that, so every simulated run takes
        several checkpoints; on a cluster they stay as they are."""
        scale = shape.period(1.0)
        if scale == 1.0:
            return self
        update = {f: getattr(self, f) * scale for f in ("interval", "burst_window")
                  if f not in self.model_fields_set}
        return self.model_copy(update=update) if update else self

    def check(self, graph: GraphView) -> list[str]:
        sinks = sorted(graph.queries)
        return [f"priorities.{s}: no sink operator named {s!r} (sinks: {', '.join(sinks)})"
                for s in self.priorities if s not in graph.queries]
