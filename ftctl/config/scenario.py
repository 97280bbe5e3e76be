"""Chaos-scenario files: a seeded schedule of faults. Data only; injection lives in `chaos`.

Each fault entry names a fault type, when it strikes (exactly one of `at`, `every`,
`trigger` or `after`), what it hits (`target`) and its type-specific `params`. The params of
each type have their own model in `PARAMS`; `load_scenario` validates them so a typo in a
param is reported with its line like any other field.

`after` times a fault relative to something that happens in the run: `delay` seconds after
another fault (named by its `id`) is injected, or after the protocol enters a phase. Which
ids exist and that `after` chains have no cycle is `relation_error`'s check; whether the
protocol ever enters the phase is checked against the protocol (`chaos.plan`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

FaultType = Literal[
    "kill-task",
    "kill-executor",
    "kill-worker",
    "kill-group",
    "pause",
    "partition",
    "delay",
    "drop",
    "slow",
    "restore-capacity",
    "container-kill",
    "container-stop",
    "container-pause",
    "container-restart",
    "corrupt",
    "truncate",
    "delete",
    "store-unavailable",
    "lose-unsynced",
]
Trigger = Literal["during-checkpoint", "during-recovery"]

_NAME = r"[A-Za-z][A-Za-z0-9_-]*"
_LABEL = r"[A-Za-z0-9_.-]+=[A-Za-z0-9_.-]+"
TARGET_PATTERN = rf"^(random|{_NAME}(\[[0-9]+\])?|{_LABEL}(,{_LABEL})*)$"
_INSTANCE_RE = re.compile(rf"^({_NAME})\[([0-9]+)\]$")


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


@dataclass(frozen=True)
class FaultKind:
    """What a fault type does and which optional fields it accepts."""

    description: str
    params: type[BaseModel]
    takes_duration: bool = False
    takes_window: bool = False


FAULT_TYPES: dict[str, FaultKind] = {
    "kill-task": FaultKind("SIGKILL an operator task's Python worker", NoParams),
    "kill-executor": FaultKind("SIGKILL the executor running the target", NoParams),
    "kill-worker": FaultKind(
        "kill a worker (node loss): its executors and tasks die (docker: its container)",
        NoParams,
    ),
    "kill-group": FaultKind(
        "correlated failure: kill every matching worker within `window` seconds",
        NoParams,
        takes_window=True,
    ),
    "pause": FaultKind(
        "SIGSTOP the target's process tree, SIGCONT after `duration`",
        NoParams,
        takes_duration=True,
    ),
    "partition": FaultKind(
        "cut the network between the target and `peer` for `duration`",
        PeerParams,
        takes_duration=True,
    ),
    "delay": FaultKind(
        "add `ms` (+ `jitter_ms`) latency to the target's links for `duration`",
        DelayParams,
        takes_duration=True,
    ),
    "drop": FaultKind(
        "drop messages on the target's links with `probability` for `duration`",
        DropParams,
        takes_duration=True,
    ),
    "slow": FaultKind(
        "slow node: the target runs `factor` times slower for `duration`",
        SlowParams,
        takes_duration=True,
    ),
    "restore-capacity": FaultKind(
        "bring lost workers back, all at once or progressively (`mode`, `distribution`)",
        RestoreParams,
    ),
    # Docker backend only (a worker is a container there); refused before the run otherwise.
    "container-kill": FaultKind(
        "docker: SIGKILL the worker's container (node crash); `restore-capacity` replaces it",
        NoParams,
    ),
    "container-stop": FaultKind(
        "docker: stop the worker's container (SIGTERM, SIGKILL after `timeout`), start it "
        "again after `duration` (none: it stays down, restore-capacity replaces it)",
        StopParams,
        takes_duration=True,
    ),
    "container-pause": FaultKind(
        "docker: freeze the worker's container (cgroup freezer), unpause after `duration`",
        NoParams,
        takes_duration=True,
    ),
    "container-restart": FaultKind(
        "docker: restart the worker's container (stop within `timeout`, start at once)",
        StopParams,
    ),
    # Store faults: simulation host only (``ftctl sim --scenario``); refused on Spark.
    "corrupt": FaultKind("flip a byte of one stored object of the target (`snapshot`, "
                         "else its newest)", StoredObjectParams),
    "truncate": FaultKind("cut the tail off one stored object of the target (`snapshot`, "
                          "else its newest)", StoredObjectParams),
    "delete": FaultKind("delete one stored object of the target (`snapshot`, else its "
                        "newest)", StoredObjectParams),
    "store-unavailable": FaultKind("every read and write of the snapshot store fails for "
                                   "`duration`", NoParams, takes_duration=True),
    "lose-unsynced": FaultKind("crash the target; its writes not yet acknowledged vanish",
                               NoParams),
}
# Fault types that act on a worker's container: only the docker backend has them.
CONTAINER_FAULTS: tuple[str, ...] = tuple(t for t in FAULT_TYPES if t.startswith("container-"))
# Fault types of the snapshot store: only the simulation host realizes them.
STORE_FAULTS: tuple[str, ...] = ("corrupt", "truncate", "delete", "store-unavailable",
                                 "lose-unsynced")
# A selector key every worker carries: its ftctl name (`worker=w1` targets worker w1).
WORKER_KEY = "worker"
assert set(FAULT_TYPES) == set(get_args(FaultType)), "FAULT_TYPES and FaultType disagree"

PARAMS: dict[str, type[BaseModel]] = {name: kind.params for name, kind in FAULT_TYPES.items()}
# The most occurrences one fault may ask for (`count`): more is a typo, not a test.
MAX_COUNT = 10_000
WHEN = ("at", "every", "trigger", "during", "after")
# The target of a phase-triggered fault that strikes the instance holding the phase.
PHASE_HOLDER = "phase-holder"


# ---------------------------------------------------------------- targets


@dataclass(frozen=True)
class Target:
    """A parsed `target`: kind is random, instance, operator or selector."""

    kind: Literal["random", "instance", "operator", "selector"]
    operator: str | None = None
    index: int | None = None
    labels: tuple[tuple[str, str], ...] = ()


def parse_target(text: str) -> Target:
    """Parse a target string; it must already match TARGET_PATTERN."""
    if text == "random":
        return Target("random")
    if "=" in text:
        pairs = tuple((k, v) for k, _, v in (p.partition("=") for p in text.split(",")))
        return Target("selector", labels=pairs)
    m = _INSTANCE_RE.match(text)
    if m:
        return Target("instance", operator=m.group(1), index=int(m.group(2)))
    return Target("operator", operator=text)


# ---------------------------------------------------------------- relative timing

# The phase every run has: the host is recovering from a detected failure. Protocols
# declare the others (ProtocolSpec.phases, e.g. checkpoint's `snapshotting`).
RECOVERING = "recovering"
# The phase each trigger waits for: `trigger: T` is `during: TRIGGER_PHASES[T]`.
TRIGGER_PHASES: dict[str, str] = {"during-checkpoint": "snapshotting",
                                  "during-recovery": RECOVERING}
_DELAY_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(ms|s)?\s*$")


def _seconds(value: Any) -> Any:
    """`2`, `2.5`, `"2s"` and `"500ms"` are seconds; anything else is left to pydantic."""
    if isinstance(value, str):
        m = _DELAY_RE.match(value)
        if m is None:
            raise ValueError(f"expected seconds like 2, 2s or 500ms, got {value!r}")
        return float(m.group(1)) / (1000.0 if m.group(2) == "ms" else 1.0)
    return value


class After(_Strict):
    """Strike `delay` seconds after another fault is injected or a phase is entered."""

    fault: str | None = Field(
        default=None, pattern=rf"^{_NAME}$",
        description="The `id` of the fault this one follows: it strikes `delay` after each "
        "occurrence of that fault is injected (`count` of them, default 1).",
    )
    phase: str | None = Field(
        default=None, pattern=rf"^{_NAME}$",
        description=f"A phase the protocol enters (`snapshotting` for checkpoint, "
        f"`{RECOVERING}` for every protocol): strike `delay` after it is entered "
        "(`count` times, default 1).",
    )
    delay: float = Field(
        default=0.0, ge=0,
        description="Seconds to wait: a number, or a string like `2s` or `500ms`.",
    )

    @field_validator("delay", mode="before")
    @classmethod
    def _delay_units(cls, value: Any) -> Any:
        return _seconds(value)

    @model_validator(mode="after")
    def _one_anchor(self) -> After:
        if (self.fault is None) == (self.phase is None):
            raise ValueError("give exactly one of 'fault' (a fault's id) or 'phase'")
        return self


# ---------------------------------------------------------------- the scenario


class Fault(_Strict):
    """One fault: what, when, where."""

    type: FaultType = Field(description="Fault type, see `ftctl list faults`.")
    id: str | None = Field(
        default=None, pattern=rf"^{_NAME}$",
        description="A name for this fault, unique in the file, for other faults' "
        "`after: {fault: ...}`.",
    )
    at: float | None = Field(default=None, ge=0, description="Seconds into the run.")
    every: float | None = Field(default=None, gt=0, description="Repeat every this many seconds.")
    count: int | None = Field(
        default=None,
        ge=1,
        le=MAX_COUNT,
        description="With `every` or `trigger`: how many times, omitted = forever; with "
        "`after`: after how many occurrences of what it follows, omitted = 1.",
    )
    trigger: Trigger | None = Field(
        default=None, description="Strike when the run reaches this phase: "
        "`during-checkpoint` is `during: snapshotting`, `during-recovery` is "
        f"`during: {RECOVERING}`."
    )
    during: str | None = Field(
        default=None, pattern=rf"^{_NAME}$",
        description="Strike while this protocol phase is open (`snapshotting`, "
        f"`{RECOVERING}`, `takeover`..., see docs/chaos.md), once per opening; `count` "
        f"as for triggers. `target: {PHASE_HOLDER}` strikes an instance holding it.",
    )
    after: After | None = Field(
        default=None,
        description="Strike relative to another fault (`{fault: kill-a, delay: 2s}`) or "
        "to a protocol phase (`{phase: snapshotting, delay: 0.5}`).",
    )
    target: str = Field(
        pattern=TARGET_PATTERN,
        description="An instance (`count[1]`), an operator (`count`), a worker label "
        "selector (`rack=a`; `worker=w1` names a worker), `random`, or with `during` "
        f"`{PHASE_HOLDER}` (an instance holding the phase when it strikes).",
    )
    window: float | None = Field(
        default=None,
        gt=0,
        description="kill-group: the matching workers die within this many seconds.",
    )
    duration: float | None = Field(
        default=None,
        gt=0,
        description="pause/partition/delay/drop/slow/container-stop/container-pause: seconds "
        "until healed.",
    )
    params: dict[str, Any] = Field(
        default_factory=dict, description="Type-specific parameters, see `ftctl list faults`."
    )
    optional: bool = Field(
        default=False,
        description="A fault that cannot be delivered (its target gone, or restarting for "
        "longer than the nemesis waits) fails the run (exit 1) unless optional.",
    )

    @field_validator("count")
    @classmethod
    def _count_needs_repeat(cls, count: int | None, info: ValidationInfo) -> int | None:
        if count is not None and info.data.get("at") is not None:
            raise ValueError("goes with 'every', 'trigger' or 'after', not 'at'")
        return count

    @field_validator("window")
    @classmethod
    def _window_for_groups(cls, window: float | None, info: ValidationInfo) -> float | None:
        kind = info.data.get("type")
        if window is not None and kind and not FAULT_TYPES[kind].takes_window:
            raise ValueError(f"only kill-group takes a window, not {kind}")
        return window

    @field_validator("duration")
    @classmethod
    def _duration_for_healable(cls, duration: float | None, info: ValidationInfo) -> float | None:
        kind = info.data.get("type")
        if duration is not None and kind and not FAULT_TYPES[kind].takes_duration:
            raise ValueError(f"{kind} takes no duration")
        return duration

    @model_validator(mode="after")
    def _exactly_one_when(self) -> Fault:
        given = [k for k in WHEN if getattr(self, k) is not None]
        if len(given) != 1:
            what = "none" if not given else " and ".join(f"'{k}'" for k in given)
            raise ValueError(f"give exactly one of 'at', 'every', 'trigger', 'during' or "
                             f"'after' (got {what})")
        if self.target == PHASE_HOLDER and self.phase is None:
            raise ValueError(f"target {PHASE_HOLDER} goes with 'during' or 'trigger': "
                             "only a phase has a holder")
        return self

    @property
    def phase(self) -> str | None:
        """The phase a `during` or `trigger` fault strikes in (None for the others)."""
        return self.during or TRIGGER_PHASES.get(self.trigger or "")

    def typed_params(self) -> BaseModel:
        """The params validated by this fault type's model (raises pydantic ValidationError)."""
        return PARAMS[self.type].model_validate(self.params)

    def parsed_target(self) -> Target:
        return parse_target(self.target)


class Scenario(_Strict):
    """A chaos-scenario file."""

    name: str = Field(pattern=rf"^{_NAME}$")
    description: str = ""
    seed: int = Field(default=1, description="Seeds every random choice (targets, gaps, drops).")
    faults: list[Fault] = Field(description="The schedule; an empty list is a fault-free run.")


def relation_error(scenario: Scenario) -> tuple[tuple[str | int, ...], str] | None:
    """The first problem with the scenario's ids and `after` chains, as (where, why):
    a repeated id, an `after.fault` naming no fault, or a cycle (no fault in it would
    ever strike). None when there is none."""
    ids: dict[str, int] = {}
    for i, fault in enumerate(scenario.faults):
        if fault.id is None:
            continue
        if fault.id in ids:
            return ("faults", i, "id"), (f"{fault.id!r} is already the id of faults"
                                         f"[{ids[fault.id]}]; ids must be unique")
        ids[fault.id] = i
    follows: dict[int, int] = {}
    for i, fault in enumerate(scenario.faults):
        name = fault.after.fault if fault.after is not None else None
        if name is None:
            continue
        if name not in ids:
            known = ", ".join(sorted(ids)) or "none has an id"
            return ("faults", i, "after", "fault"), (f"no fault has id {name!r} (ids: "
                                                     f"{known})")
        follows[i] = ids[name]
    for start in sorted(follows):
        seen = [start]
        at = follows[start]
        while at in follows and at not in seen:
            seen.append(at)
            at = follows[at]
        if at == start:
            chain = " -> ".join(str(scenario.faults[k].id or k) for k in [*seen, start])
            return ("faults", start, "after", "fault"), (
                f"faults follow each other in a cycle ({chain}), so none of them would "
                "ever strike; start the chain with a fault timed by 'at' or a phase")
    return None
