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
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

# The params models and the kinds' table live with the registry; re-exported here, where
# the scenario model's users have always found them.
from ftctl.config.fault_kinds import (  # noqa: F401
    _NAME,
    FAULT_TYPES,
    PARAMS,
    SCENARIO_KINDS,
    TARGET_PATTERN,
    DelayParams,
    DropParams,
    FaultKind,
    NoParams,
    PeerParams,
    RestoreParams,
    SlowParams,
    StopParams,
    StoredObjectParams,
    _Strict,
    kinds_where,
)

# The kinds a scenario names (the registry's, ``ftctl.config.fault_kinds``); a Literal so
# an unknown one is refused with the known ones listed.
if TYPE_CHECKING:
    FaultType = str
else:
    FaultType = Literal[SCENARIO_KINDS]
Trigger = Literal["during-checkpoint", "during-recovery"]

_INSTANCE_RE = re.compile(rf"^({_NAME})\[([0-9]+)\]$")


# Fault types that act on a worker's container: only the docker backend has them.
CONTAINER_FAULTS: tuple[str, ...] = kinds_where(docker=True)
# Fault types no Spark host realizes: simulation host only (none at present).
STORE_FAULTS: tuple[str, ...] = tuple(n for n in SCENARIO_KINDS
                                   if FAULT_TYPES[n].hosts == ("sim",))
# A selector key every worker carries: its ftctl name (`worker=w1` targets worker w1).
WORKER_KEY = "worker"
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
        if self.duration is None and FAULT_TYPES[self.type].needs_duration:
            raise ValueError(f"{self.type} needs a duration (how long it lasts)")
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
