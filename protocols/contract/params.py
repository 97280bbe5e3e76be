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

    nominal_duration: float  # seconds the sources take to emit everything, fault-free
    snapshots_per_run: int = 8  # a periodic protocol should act this often per run


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


def describe(exc: ValidationError, model: type[BaseModel], protocol: str = "") -> str:
    """The first error of ``exc`` as one line: ``depth must be >= 1, got '0'``."""
    err = exc.errors()[0]
    name = ".".join(str(p) for p in err["loc"]) or "params"
    ctx = err.get("ctx") or {}
    got = err.get("input")
    kind = err["type"]
    rules = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=",
             "less_than": "<"}
    if kind == "extra_forbidden":
        known = ", ".join(model.model_fields) or "none"
        who = f" for {protocol}" if protocol else ""
        return f"unknown parameter {name!r}{who} (known: {known})"
    if kind in rules:
        bound = next(iter(ctx.values()))
        return f"{name} must be {rules[kind]} {bound}, got {got!r}"
    if kind == "literal_error" or kind == "enum":
        return f"{name} must be {ctx.get('expected', 'one of the allowed values')}, got {got!r}"
    if kind.endswith("_parsing") or kind.endswith("_type"):
        what = kind.split("_")[0]
        noun = {"int": "an integer", "float": "a number", "bool": "true or false"}.get(
            what, f"a valid {what}")
        return f"{name} must be {noun}, got {got!r}"
    return f"{name}: {err['msg']}"
