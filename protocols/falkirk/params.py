"""``--param`` keys of ``falkirk``, validated against the topology.

Policies are chosen per operator, by ``policies.<operator>=<policy>`` (contract style) or
``policy=op=policy,op=policy`` (one string); operators not named take
``default_stateless`` or ``default_stateful``. A policy an operator cannot use (a
stateful one on a map, ``log`` on a count, any on a source or sink, an unknown operator)
is refused with one line naming the operator.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from protocols.contract.params import ProtocolParams, RunShape
from protocols.contract.view import GraphView
from protocols.falkirk.policy import SINK, SOURCE, Policy, PolicyError


def _check_policy(v: str) -> str:
    try:
        Policy.parse(v)
    except PolicyError:
        # read as "<field> must be <this>, got <value>" by the contract's describe()
        raise PydanticCustomError(
            "policy", "ephemeral, log, batch, lazy:K (K >= 1) or eager, with +log allowed "
            "after a stateful one") from None
    return v.strip()


PolicyText = Annotated[str, AfterValidator(_check_policy)]


class FalkirkParams(ProtocolParams):
    policies: dict[str, PolicyText] = Field(
        default_factory=dict, description="Policy per operator name, e.g. "
        "policies.sharder=log policies.shard=eager.")
    policy: str = Field(default="", description="The same as one string: "
                        "'sharder=log,shard=lazy:2'.")
    default_stateless: PolicyText = Field(default="ephemeral",
                                   description="Policy of unnamed stateless operators.")
    default_stateful: PolicyText = Field(default="lazy:4",
                                  description="Policy of unnamed stateful operators.")
    epoch_records: int = Field(default=0, ge=0, description="Records per epoch and source "
                               "instance; 0 = about 16 epochs per run.")
    stagger: Literal["off", "on"] = Field(default="off", description="Offset lazy "
                                          "checkpoints by instance index (shows the domino "
                                          "effect).")
    pause: Literal["all"] = "all"
    rollback: Literal["restart", "in-place"] = Field(
        default="restart", description="How a live instance whose frontier moved rolls "
        "back: restart at its frontier, or in place (RollBack: no restart).")
    stateful_order: Literal["aligned"] = "aligned"
    precise_meta: Literal["off"] = "off"
    deterministic_replay: Literal["off"] = "off"
    sink_commit: Literal["complete"] = "complete"

    @model_validator(mode="after")
    def _merge(self) -> FalkirkParams:
        merged = dict(self.policies)
        for item in filter(None, (s.strip() for s in self.policy.split(","))):
            op, sep, pol = item.partition("=")
            if not sep or not op.strip():
                raise PydanticCustomError("policy", f"op=policy items (not {item!r})")
            op, pol = op.strip(), _check_policy(pol)
            if merged.get(op, pol) != pol:
                raise PydanticCustomError(
                    "policy", f"one policy per operator ({op} is given both {merged[op]} "
                    f"and {pol})")
            merged[op] = pol
        object.__setattr__(self, "policies", merged)
        object.__setattr__(self, "policy", "")
        if Policy.parse(self.default_stateless).stateful:
            raise PydanticCustomError("policy", "a default_stateless of ephemeral or log "
                                      f"(not {self.default_stateless!r})")
        if not Policy.parse(self.default_stateful).stateful:
            raise PydanticCustomError("policy", "a default_stateful of batch, lazy:K or eager "
                                      f"(not {self.default_stateful!r})")
        return self

    def for_run(self, shape: RunShape) -> FalkirkParams:
        return self

    # ------------------------------------------------------------ per operator

    def policy_of(self, operator: str, stateful: bool, kind: str = "") -> Policy:
        """The policy an operator runs under (sources and sinks: their implicit one)."""
        if kind == "source":
            return SOURCE
        if kind == "sink":
            return SINK
        given = self.policies.get(operator)
        if given is not None:
            return Policy.parse(given)
        return Policy.parse(self.default_stateful if stateful else self.default_stateless)

    def check(self, graph: GraphView) -> list[str]:
        return check_policies(self.policies, operator_kinds(graph))


def operator_kinds(graph: GraphView) -> dict[str, str]:
    """Operator name -> ``source``, ``sink``, ``stateful`` or ``stateless``."""
    out: dict[str, str] = {}
    eg = graph.execution
    for iid, spec in eg.instances.items():
        if spec.op in out:
            continue
        if spec.is_source:
            out[spec.op] = "source"
        elif spec.is_sink:
            out[spec.op] = "sink"
        else:
            op = eg.make_operator(iid)
            out[spec.op] = "stateful" if getattr(op, "stateful", False) else "stateless"
    return out


def check_policies(policies: Mapping[str, str], kinds: Mapping[str, str]) -> list[str]:
    """One line per operator whose policy it cannot use."""
    problems = []
    for op, text in policies.items():
        kind = kinds.get(op)
        pol = Policy.parse(text)
        if kind is None:
            problems.append(f"policies.{op}: no operator {op!r} in the topology "
                            f"(operators: {', '.join(sorted(kinds))})")
        elif kind in ("source", "sink"):
            problems.append(f"policies.{op}: {op} is a {kind}; its policy is implicit")
        elif kind == "stateless" and pol.stateful:
            problems.append(f"policies.{op}: {op} is stateless; {pol} needs state "
                            "(use ephemeral or log)")
        elif kind == "stateful" and not pol.stateful:
            problems.append(f"policies.{op}: {op} is stateful; {pol} would lose its state "
                            "(use batch, lazy:K, eager, optionally +log)")
    return problems
