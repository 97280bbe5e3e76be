"""The topology model: operators, edges between them, and the input they read.

The runtime builds execution graphs from it; ``ftctl.config`` loads it from YAML (and
re-exports it as ``ftctl.config.topology``). The models check shape only; graph-level
checks (unknown operator types, edges to missing operators, cycles) live in
``ftctl.config.checks`` so each error names its field.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Partitioning = Literal["forward", "hash", "broadcast", "round-robin"]
SinkMode = Literal["multiset", "final-per-key", "ordered-per-key"]


class _Strict(BaseModel):
    # Frozen: a loaded topology is never changed in place; a command that overrides its
    # input gets a copy (``Topology.with_input``), so golden caches and stored configs
    # always see the topology a run really used.
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


# The verdict runs out of core, so disk, not memory, bounds a big run.
MAX_RECORDS = 1_000_000_000
MAX_BATCH = 100_000


class RateChange(_Strict):
    """From a source's record ``at`` on, it is paced at ``rate`` instead of ``input.rate``."""

    at: int = Field(ge=1, description="Records of each source emitted at input.rate first.")
    rate: float = Field(gt=0, description="Records per second per source after that.")


class InputSpec(_Strict):
    """How much input the sources generate and how fast."""

    records: int = Field(
        default=2000, ge=1, le=MAX_RECORDS, description="Records each source generates.")
    rate: float | None = Field(
        default=None,
        gt=0,
        description="Records per second per source; omitted = as fast as possible.",
    )
    rate_change: RateChange | None = Field(
        default=None,
        description="One change of pace (needs rate), e.g. build up state at a high rate, "
        "then run at a light load. The simulation host paces by rate alone (ftctl "
        "sim: gaps between batches shortened to 50 ms).",
    )
    seed: int = Field(default=1, description="Seed of the replayable sources.")
    batch: int = Field(default=100, ge=1, le=MAX_BATCH,
                       description="Records per batch on the wire.")


class SourceInput(_Strict):
    """A source's own input size and seed, overriding the top-level `input` for it."""

    records: int | None = Field(default=None, ge=1, le=MAX_RECORDS,
                                description="Records this source generates.")
    seed: int | None = Field(default=None, description="Seed of this source.")


class OperatorSpec(_Strict):
    """One logical operator; `parallelism` instances of it run."""

    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]*$")
    type: str = Field(description="Operator type, see `ftctl list operators`.")
    parallelism: int = Field(default=1, ge=1, le=256)
    function: str | None = Field(
        default=None, description="map/filter/flat_map: a built-in name or 'module:function'."
    )
    params: dict[str, Any] = Field(default_factory=dict)
    mode: SinkMode | None = Field(
        default=None, description="Sinks: how output is compared to golden."
    )
    split: Literal["range", "strided"] | None = Field(
        default=None,
        description="Sources: how the input is split over instances. range (default): "
        "instance i reads a contiguous slice; strided: records i, i+p, i+2p, ... so every "
        "instance covers the whole event-time range at once (Nexmark's split).",
    )
    input: SourceInput | None = Field(
        default=None,
        description="Sources: records and seed for this source alone, e.g. a person stream "
        "with its own seed: input: {records: 5000, seed: 9}.",
    )
    out_type: str | None = Field(
        default=None,
        description="The record type this operator makes, for a user function that does "
        "not declare one (see `ftctl list types`).",
    )


class EdgeSpec(_Strict):
    """A channel group from every instance of `from` to the instances of `to`."""

    src: str = Field(alias="from")
    dst: str = Field(alias="to")
    partition: Partitioning = "forward"
    port: int = Field(
        default=0, ge=0, le=1, description="Input port at `to` (joins: 0 left, 1 right)."
    )


class QuerySpec(_Strict):
    """A query: its sink and every operator upstream of it (derived from the edges), with
    a priority. Sinks not listed are queries of priority 1."""

    sink: str = Field(description="The query's sink operator; the query takes its name.")
    priority: float = Field(
        default=1.0, gt=0, description="Weight of the query (papers/004's prt): progressive "
        "recovery restores the most priority per slot first.")


class Topology(_Strict):
    """A dataflow topology file."""

    name: str
    description: str = ""
    input: InputSpec = Field(default_factory=InputSpec)
    operators: list[OperatorSpec] = Field(min_length=1)
    edges: list[EdgeSpec] = Field(default_factory=list)
    queries: list[QuerySpec] = Field(
        default_factory=list, description="Query priorities, by sink (default 1 each).")
    oracle: str | None = Field(
        default=None,
        description="A batch oracle computing the expected sink output (e.g. word-count).",
    )

    def source_records(self, op: OperatorSpec) -> int:
        """Records a source generates: its own `input.records`, a table's row count, or
        the top-level `input.records`."""
        if op.input is not None and op.input.records is not None:
            return op.input.records
        if op.type == "source.table":
            return len(op.params.get("rows") or [])
        return self.input.records

    def source_seed(self, op: OperatorSpec) -> int:
        if op.input is not None and op.input.seed is not None:
            return op.input.seed
        return self.input.seed

    def with_input(self, records: int | None = None, rate: float | None = None,
                   seed: int | None = None, batch: int | None = None,
                   rate_change: RateChange | None = None) -> Topology:
        """A copy whose ``input`` takes the given values (None: keep the topology's own),
        validated like the file's; the topology itself is frozen."""
        given = {"records": records, "rate": rate, "seed": seed, "batch": batch,
                 "rate_change": rate_change}
        changes = {k: v for k, v in given.items() if v is not None}
        if not changes:
            return self
        spec = InputSpec.model_validate({**dict(self.input), **changes})
        return self.model_copy(update={"input": spec})

    def with_operators(self, operators: list[OperatorSpec]) -> Topology:
        """A copy with these operators (same edges and input)."""
        return self.model_copy(update={"operators": list(operators)})

    def sink_modes(self) -> dict[str, str]:
        """How each sink's output is compared to golden, by sink name."""
        return {op.name: op.mode or "multiset" for op in self.operators if op.type == "sink"}

    def operator(self, name: str) -> OperatorSpec:
        for op in self.operators:
            if op.name == name:
                return op
        raise KeyError(name)
