"""Typed protocol parameters: one pydantic model per protocol, validated before a run.

On the command line ``--param key=value`` sets a field; dotted keys nest
(``--param policies.count=eager-checkpoint``, ``--param burst.window=5``). Values stay
strings until pydantic coerces them, so error messages name the field and the rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Self, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from protocols.contract.view import GraphView


@dataclass(frozen=True, slots=True)
class RunShape:
    """What a run looks like before it starts: parameters marked ``"auto"`` scale to it."""

    # Seconds the sources take to emit everything, fault-free; None on a real cluster,
    # where "auto" values take the protocol's wall-clock default instead.
    nominal_duration: float | None = None
    snapshots_per_run: int = 8  # a periodic protocol should act this often per run

    def period(self, default: float) -> float:
        """An ``"auto"`` period: ``snapshots_per_run`` per simulated run, else ``default``."""
        if self.nominal_duration is None:
            return default
        return self.nominal_duration / self.snapshots_per_run


class ProtocolParams(BaseModel):
    """Base of every protocol's parameter model: unknown keys are errors, values frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def for_run(self, shape: RunShape) -> Self:
        """Resolve ``"auto"`` values for a run of this shape (default: nothing to resolve)."""
        return self

    def check(self, graph: GraphView) -> list[str]:
        """Problems of these params with this topology (unknown operator names, a policy
        an operator cannot take), one line each naming the param. Default: none."""
        return []


class NoParams(ProtocolParams):
    """A protocol without parameters."""


P = TypeVar("P", bound=ProtocolParams)


class ParamError(ValueError):
    """A bad ``--param``: the message is one line that names the param."""


def parse_items(items: Iterable[str] | None) -> dict[str, Any]:
    """``["a=1", "b.c=x"]`` -> ``{"a": "1", "b": {"c": "x"}}`` (values stay strings)."""
    out: dict[str, Any] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key or any(not p for p in key.split(".")):
            raise ParamError(f"expected key=value, got {item!r}")
        *path, leaf = key.split(".")
        node = out
        for i, part in enumerate(path):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ParamError(f"{'.'.join(path[:i + 1])} is given both as a value and "
                                 f"as a group ({item!r})")
            node = child
        if isinstance(node.get(leaf), dict):
            raise ParamError(f"{key} is given both as a group and as a value ({item!r})")
        node[leaf] = value.strip()
    return out


def validate(model: type[P], given: Mapping[str, Any], protocol: str = "") -> P:
    """The params model built from ``given``; raises ``ParamError`` naming the first bad one."""
    try:
        return model.model_validate(dict(given))
    except ValidationError as exc:
        raise ParamError(describe(exc, model, protocol)) from None


_TYPE_TAGS = {"float", "int", "str", "bool", "none", "dict", "list", "tuple", "set"}
_RULES = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=",
          "less_than": "<"}
_NOUNS = {"int": "an integer", "float": "a number", "bool": "true or false",
          "string": "a string", "dict": "a group of key=value", "list": "a list"}


def describe(exc: ValidationError, model: type[BaseModel], protocol: str = "") -> str:
    """The first bad param of ``exc`` as one line: ``depth must be >= 1, got '0'``.

    A field whose type is a union (``interval: float | "auto"``) fails once per member;
    those failures are joined: ``interval must be > 0 or 'auto', got '0'``.
    """
    errors = exc.errors()
    name = _name(errors[0]["loc"])
    same = [e for e in errors if _name(e["loc"]) == name]
    first = same[0]
    if first["type"] == "extra_forbidden":
        known = ", ".join(model.model_fields) or "none"
        who = f" for {protocol}" if protocol else ""
        return f"unknown parameter {name!r}{who} (known: {known})"
    wants = " or ".join(dict.fromkeys(_expectation(e) for e in same))
    return f"{name} must be {wants}, got {first.get('input')!r}"


def _name(loc: tuple[int | str, ...]) -> str:
    # Union members appear in the location as type tags ("constrained-float",
    # "literal['auto']"); the user named only the field path.
    parts = [str(p) for p in loc
             if not (isinstance(p, str) and (p in _TYPE_TAGS or any(c in p for c in "[-(")))]
    return ".".join(parts) or "params"


def _expectation(err: Any) -> str:
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind in _RULES:
        return f"{_RULES[kind]} {next(iter(ctx.values()))}"
    if kind in ("literal_error", "enum"):
        return str(ctx.get("expected", "one of the allowed values"))
    if kind.endswith("_parsing") or kind.endswith("_type"):
        what = kind.split("_")[0]
        return _NOUNS.get(what, f"a valid {what}")
    return str(err["msg"]).removeprefix("Input should be ").removeprefix("Value error, ")
