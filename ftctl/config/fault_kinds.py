"""The fault kinds: one table, ``FAULT_TYPES``, name -> everything about the kind.

A kind's entry says what its params are (a pydantic model: numbers such as an offset in
seconds, a rate or a factor are fields with bounds), whether it takes a ``duration`` or a
``window``, how the planner resolves its target (``scope``), which hosts realize it and
with what (``sim``: the simulation host's realization of one scenario occurrence;
``spark``: the ``ChaosFault`` class the Spark host strikes with; ``draw``: how ``ftctl sim
--faults`` draws one at random), and what delivery it needs on Spark (the docker backend,
the tasks' agent, process access to the workers). The planner (``chaos.schedule``,
``chaos.plan``), the trigger engine (``chaos.engine``) and both hosts read it; nothing
else lists kinds.

Realizations are named ``"module:attribute"`` and imported when first used, so this module
stays data: the scenario model imports it, and the hosts import the scenario model.
Adding a kind: docs/chaos.md, "Adding a fault kind".
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

_NAME = r"[A-Za-z][A-Za-z0-9_-]*"
_LABEL = r"[A-Za-z0-9_.-]+=[A-Za-z0-9_.-]+"
TARGET_PATTERN = rf"^(random|{_NAME}(\[[0-9]+\])?|{_LABEL}(,{_LABEL})*)$"

# How the planner resolves a kind's target (``chaos.schedule.resolve_target``):
# "instance": ``random`` and operators become one instance; "group": a label selector or
# ``random`` (a failure domain drawn when it strikes); "capacity": the lost workers a
# selector names; "worker": an operator becomes an instance (its worker is struck),
# ``random`` a live worker drawn when it strikes.
Scope = Literal["instance", "group", "capacity", "worker"]
Host = Literal["sim", "spark"]


class _Strict(BaseModel):
    # No infinity or NaN anywhere: a fault at .inf never strikes and one every .nan
    # cannot be planned; both are typos, refused with their line.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


# ---------------------------------------------------------------- params per fault type


class NoParams(_Strict):
    """This fault type takes no params."""


class PeerParams(_Strict):
    peer: str | None = Field(
        default=None,
        pattern=TARGET_PATTERN,
        description="The other side of the link; omitted = every peer of the target.",
    )


class DelayParams(PeerParams):
    ms: float = Field(gt=0, description="Added one-way delay in milliseconds.")
    jitter_ms: float = Field(default=0.0, ge=0, description="Uniform jitter added on top of `ms`.")


class DropParams(PeerParams):
    probability: float = Field(gt=0, le=1, description="Chance that a message is dropped.")


class SlowParams(_Strict):
    factor: float = Field(default=2.0, gt=1, description="How many times slower the target runs.")


class RestoreParams(_Strict):
    mode: Literal["all", "progressive"] = Field(
        default="all", description="Bring lost workers back at once, or one by one."
    )
    distribution: Literal["fixed", "uniform", "paper"] = Field(
        default="fixed",
        description="Progressive: gap between returns; fixed = `scale` s, uniform = "
        "[min, max] s, paper = the progressive-recovery paper's distribution times `scale`.",
    )
    min: float = Field(default=0.0, ge=0, description="Uniform: shortest gap in seconds.")
    max: float = Field(default=5.0, ge=0, description="Uniform: longest gap in seconds.")
    scale: float = Field(
        default=1.0, gt=0, description="Fixed gap, or the paper distribution's scale."
    )

    @model_validator(mode="after")
    def _min_le_max(self) -> RestoreParams:
        if self.min > self.max:
            raise ValueError(f"min ({self.min:g}) is greater than max ({self.max:g})")
        return self


class StopParams(_Strict):
    timeout: int = Field(
        default=2,
        ge=0,
        description="Whole seconds between SIGTERM and SIGKILL of the container "
        "(docker stop -t).",
    )


class StoredObjectParams(_Strict):
    snapshot: int | None = Field(
        default=None, ge=0,
        description="The snapshot id of the target's object; omitted = its newest.")


class StoreSlowParams(_Strict):
    latency: float = Field(gt=0, le=60, description="Seconds each read and write of the "
                           "snapshot store takes longer.")


class SkewParams(_Strict):
    offset: float = Field(description="Seconds the target's clock reads ahead (+) or "
                          "behind (-) from now on.")


class DriftParams(_Strict):
    rate: float = Field(gt=0, description="Seconds the target's clock counts per true "
                        "second from now on (1.05: 5% fast).")


class JumpParams(_Strict):
    by: float = Field(description="One step of the target's clock, in seconds: forward "
                      "(+) or back (-).")


class StallParams(_Strict):
    catch_up: bool = Field(default=False, description="At the end of the stall, step "
                           "forward by what it held back (else the clock stays behind).")


@dataclass(frozen=True)
class FaultKind:
    """Everything about one fault kind (see the module doc)."""

    description: str
    params: type[BaseModel] = NoParams
    takes_duration: bool = False
    needs_duration: bool = False  # means nothing without one (a stall of no time)
    takes_window: bool = False
    scope: Scope = "instance"
    # "module:function(actuator, planned, rng, duration)": one scenario occurrence on the
    # simulation host (``ftctl.sim.actuator``); None: the simulation does not realize it.
    sim: str | None = None
    # "module:ChaosFault subclass" the Spark host strikes with; None: not on Spark.
    spark: str | None = None
    # "module:function(rng, horizon, max_burst) -> SimFault": one random occurrence for
    # ``ftctl sim --faults``; None: scenario files only.
    draw: str | None = None
    # What ``ftctl sim``'s own schedules and records call it (``crash`` for kill-task,
    # ``node`` for kill-worker): kept so pinned seeds, histories and traces read the same;
    # ``--faults`` takes either name.
    sim_name: str | None = None
    docker: bool = False  # on Spark only with the docker backend (a worker is a container)
    # With ``--master`` the task's agent carries it out (no access to worker processes
    # needed); ``timed_by_agent``: the agent also ends it, so it needs a duration there.
    agent: bool = False
    timed_by_agent: bool = False
    cluster: bool = False  # acts on workers: needs the processes of a cluster ftctl started
    # Whether a recovery is measured after it (detection, restart, first output): False
    # for a kind that fails nothing by itself, so a later failure is not put down to it.
    recovers: bool = True
    # Realized only by an engine that runs a driver process of its own
    # (``-p structured-streaming``, ``ftctl/engines``), not by the hosts of the protocols.
    engine: bool = False

    @property
    def hosts(self) -> tuple[Host, ...]:
        """The hosts that realize it in scenario files."""
        hosts: tuple[tuple[Host, str | None], ...] = (("sim", self.sim), ("spark", self.spark))
        return tuple(h for h, on in hosts if on)

    @property
    def in_scenarios(self) -> bool:
        """Scenario files may name it: some host (or an engine) realizes it."""
        return bool(self.hosts) or self.engine


_SIM = "ftctl.sim.actuator"
_STORE = "ftctl.sim.store_faults"
_DRAWS = "ftctl.sim.faults"
_CLOCK = "ftctl.sim.clock_faults"

FAULT_TYPES: dict[str, FaultKind] = {
    "kill-task": FaultKind(
        "SIGKILL an operator task's Python worker",
        sim=f"{_SIM}:kill_task", spark="chaos.faults:KillTask",
        draw=f"{_DRAWS}:draw_crash", sim_name="crash", agent=True),
    "kill-executor": FaultKind(
        "SIGKILL the executor running the target",
        sim=f"{_SIM}:node_lost", spark="chaos.faults:KillExecutor", agent=True, cluster=True),
    "kill-worker": FaultKind(
        "kill a worker (node loss): its executors and tasks die (docker: its container)",
        sim=f"{_SIM}:node_lost", spark="chaos.faults:KillWorker",
        draw=f"{_DRAWS}:draw_node", sim_name="node", agent=True, cluster=True),
    "kill-group": FaultKind(
        "correlated failure: kill every matching worker within `window` seconds",
        takes_window=True, scope="group",
        sim=f"{_SIM}:kill_group", spark="chaos.faults:KillGroup", cluster=True),
    "pause": FaultKind(
        "SIGSTOP the target's process tree, SIGCONT after `duration`",
        takes_duration=True, sim=f"{_SIM}:pause", spark="chaos.faults:Pause",
        draw=f"{_DRAWS}:draw_pause", agent=True, timed_by_agent=True),
    "partition": FaultKind(
        "cut the network between the target and `peer` for `duration`",
        PeerParams, takes_duration=True,
        sim=f"{_SIM}:link", spark="chaos.faults:Partition", draw=f"{_DRAWS}:draw_partition"),
    "delay": FaultKind(
        "add `ms` (+ `jitter_ms`) latency to the target's links for `duration`",
        DelayParams, takes_duration=True,
        sim=f"{_SIM}:link", spark="chaos.faults:Delay", draw=f"{_DRAWS}:draw_delay"),
    "drop": FaultKind(
        "drop messages on the target's links with `probability` for `duration`",
        DropParams, takes_duration=True,
        sim=f"{_SIM}:link", spark="chaos.faults:Drop", draw=f"{_DRAWS}:draw_drop"),
    "slow": FaultKind(
        "slow node: the target runs `factor` times slower for `duration`",
        SlowParams, takes_duration=True, sim=f"{_SIM}:slow", spark="chaos.faults:Slow",
        draw=f"{_DRAWS}:draw_slow", agent=True, timed_by_agent=True),
    "restore-capacity": FaultKind(
        "bring lost workers back, all at once or progressively (`mode`, `distribution`)",
        RestoreParams, scope="capacity", recovers=False,
        sim=f"{_SIM}:restore_capacity", spark="chaos.faults:RestoreCapacity", cluster=True),
    "container-kill": FaultKind(
        "docker: SIGKILL the worker's container (node crash); `restore-capacity` replaces it",
        scope="worker", sim=f"{_SIM}:node_lost", spark="chaos.containers:ContainerKill",
        docker=True, cluster=True),
    "container-stop": FaultKind(
        "docker: stop the worker's container (SIGTERM, SIGKILL after `timeout`), start it "
        "again after `duration` (none: it stays down, restore-capacity replaces it)",
        StopParams, takes_duration=True, scope="worker",
        sim=f"{_SIM}:node_stopped", spark="chaos.containers:ContainerStop",
        docker=True, cluster=True),
    "container-pause": FaultKind(
        "docker: freeze the worker's container (cgroup freezer), unpause after `duration`",
        takes_duration=True, scope="worker",
        sim=f"{_SIM}:container_pause", spark="chaos.containers:ContainerPause",
        docker=True, cluster=True),
    "container-restart": FaultKind(
        "docker: restart the worker's container (stop within `timeout`, start at once)",
        StopParams, scope="worker",
        sim=f"{_SIM}:node_restarted", spark="chaos.containers:ContainerRestart",
        docker=True, cluster=True),
    # Correlated failures ``ftctl sim --faults`` draws (``ftctl/sim/correlated.py``):
    # two neighbouring instances of one operator at once, or the second just after the
    # first one's replacement started; capacity lost and returned node by node.
    "pair": FaultKind(
        "crash an instance and the next instance of its operator together (ftctl sim "
        "--faults only)", draw=f"{_DRAWS}:draw_pair"),
    "after-restart": FaultKind(
        "crash an instance, then its neighbour just after the first one's replacement "
        "starts (ftctl sim --faults only)", draw=f"{_DRAWS}:draw_after_restart"),
    "staged": FaultKind(
        "take nodes down at once and return them one at a time (ftctl sim --faults only)",
        draw=f"{_DRAWS}:draw_staged"),
    # Store faults: on the simulation host's MemoryStore, and on Spark done by the driver
    # on the run's DirectoryStore (``chaos/store_faults.py``; lose-unsynced: with the
    # driver's account of unsynced writes, ``ftctl/spark/durability.py``). Damage fails
    # nothing by itself: the recovery measured is that of the failure that reads it.
    "corrupt": FaultKind(
        "flip a byte of one stored object of the target (`snapshot`, else its newest)",
        StoredObjectParams, sim=f"{_STORE}:damage", spark="chaos.store_faults:Corrupt",
        recovers=False, draw=f"{_STORE}:draw_damage"),
    "truncate": FaultKind(
        "cut the tail off one stored object of the target (`snapshot`, else its newest)",
        StoredObjectParams, sim=f"{_STORE}:damage", spark="chaos.store_faults:Truncate",
        recovers=False, draw=f"{_STORE}:draw_damage"),
    "delete": FaultKind(
        "delete one stored object of the target (`snapshot`, else its newest)",
        StoredObjectParams, sim=f"{_STORE}:damage", spark="chaos.store_faults:Delete",
        recovers=False, draw=f"{_STORE}:draw_damage"),
    "store-unavailable": FaultKind(
        "every read and write of the snapshot store fails for `duration`",
        takes_duration=True, sim=f"{_STORE}:outage", spark="chaos.store_faults:StoreOutage",
        draw=f"{_STORE}:draw_outage"),
    # A full store fails writes (``StoreFull``) and serves reads; a slow one delays both.
    "store-full": FaultKind(
        "every write to the snapshot store fails with no space left for `duration`; "
        "reads work", takes_duration=True, sim=f"{_STORE}:full",
        spark="chaos.store_faults:StoreFullFault", draw=f"{_STORE}:draw_full"),
    "store-slow": FaultKind(
        "each read and write of the snapshot store takes `latency` seconds more for "
        "`duration`", StoreSlowParams, takes_duration=True, sim=f"{_STORE}:slow",
        spark="chaos.store_faults:StoreSlowFault", draw=f"{_STORE}:draw_slow_store",
        recovers=False),
    "lose-unsynced": FaultKind(
        "crash the target; its writes not yet acknowledged vanish",
        sim=f"{_STORE}:lose_unsynced", spark="chaos.store_faults:LoseUnsynced",
        draw=f"{_STORE}:draw_lose_unsynced", agent=True),
    "kill-driver": FaultKind(
        "SIGKILL the driver process of an engine that has one (-p structured-streaming); "
        "it restarts from its checkpoint location (`target` is not used: give `random`)",
        engine=True),
    # Clock faults: the target's runtime clock (its events' time and its timers), never
    # the system clock; they last for the incarnation they struck.
    "clock-skew": FaultKind(
        "the target's clock reads `offset` seconds ahead or behind",
        SkewParams, sim=f"{_CLOCK}:realize", spark="chaos.clock_faults:ClockSkew", recovers=False,
        draw=f"{_CLOCK}:draw"),
    "clock-drift": FaultKind(
        "the target's clock runs at `rate` seconds per second",
        DriftParams, sim=f"{_CLOCK}:realize", spark="chaos.clock_faults:ClockDrift", recovers=False,
        draw=f"{_CLOCK}:draw"),
    "clock-jump": FaultKind(
        "the target's clock steps `by` seconds, forward or back",
        JumpParams, sim=f"{_CLOCK}:realize", spark="chaos.clock_faults:ClockJump", recovers=False,
        draw=f"{_CLOCK}:draw"),
    "clock-stall": FaultKind(
        "the target's clock stops for `duration`, then runs on (behind, unless `catch_up`)",
        StallParams, takes_duration=True, needs_duration=True, sim=f"{_CLOCK}:realize",
        spark="chaos.clock_faults:ClockStall", recovers=False, draw=f"{_CLOCK}:draw"),
}

# The kinds scenario files may name (some host realizes them), in table order.
SCENARIO_KINDS: tuple[str, ...] = tuple(n for n, k in FAULT_TYPES.items() if k.in_scenarios)
PARAMS: dict[str, type[BaseModel]] = {name: kind.params for name, kind in FAULT_TYPES.items()}


def kinds_where(**flags: bool) -> tuple[str, ...]:
    """The kinds whose spec has every given flag, e.g. ``kinds_where(docker=True)``."""
    return tuple(n for n, k in FAULT_TYPES.items()
                 if all(getattr(k, f) == on for f, on in flags.items()))


@cache
def realization(ref: str) -> Any:
    """What ``"module:attribute"`` names (a realization in the table), imported once."""
    module, _, attribute = ref.partition(":")
    return getattr(importlib.import_module(module), attribute)
