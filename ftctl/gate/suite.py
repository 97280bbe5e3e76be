"""Gate suite files: which cases to run and how much a recovery time may regress."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ftctl.config.errors import ConfigError
from ftctl.config.load import read_yaml
from protocols.contract.spec import Guarantee


class GateCase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    host: Literal["sim", "spark"] = "sim"
    topology: Path
    protocol: str
    params: dict[str, Any] = Field(default_factory=dict)
    expect: Guarantee | None = Field(None, description="Judge against this, not the declared one.")
    # sim cases
    schedules: int = Field(200, ge=1)
    seed: int = 1
    # spark cases
    scenario: Path | None = None
    kill: int | None = Field(None, ge=1)
    records: int | None = Field(None, ge=1)
    rate: float | None = Field(None, gt=0)
    workers: int | None = Field(None, ge=1)
    repeat: int | None = Field(None, ge=1, description="Overrides the suite's repeat.")
    tolerance: float | None = Field(None, ge=0, description="Overrides the suite's tolerance.")

    @model_validator(mode="after")
    def _spark_needs_faults(self) -> GateCase:
        if self.host == "spark" and self.scenario is None and self.kill is None:
            raise ValueError("a spark case needs 'scenario' or 'kill'")
        return self


class GateSuite(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    tolerance: float = Field(0.5, ge=0, description="Allowed relative regression (0.5 = +50%).")
    slack: dict[str, float] = Field(
        default_factory=lambda: {"recovery_delay_ms": 2.0, "resent_records": 200.0,
                                 "recovery_s": 2.0, "restart_s": 2.0, "detection_s": 0.5},
        description="Absolute slack per metric, added to the tolerance (noise floor).")
    repeat: int = Field(1, ge=1, description="Runs per Spark case; the median is judged.")
    include: Literal["registry"] | None = Field(
        None, description="'registry': also every registered protocol's simulation cases.")
    cases: list[GateCase] = Field(default_factory=list)


def registry_cases() -> list[GateCase]:
    """Each registered protocol's ``gate`` entries as simulation cases named
    ``{topology}-{protocol}[-{variant}]`` (``ftctl.conformance.cases``)."""
    from ftctl.conformance.cases import gate_cases

    out = []
    for case in gate_cases():
        topology = case.topology
        if topology.is_relative_to(Path.cwd()):
            topology = topology.relative_to(Path.cwd())
        out.append(GateCase.model_validate(
            {"name": case.name, "topology": topology, "protocol": case.protocol,
             "params": case.params, "schedules": case.schedules}))
    return out


def load_suite(path: Path) -> GateSuite:
    """Load a suite; case paths are taken relative to the current directory."""
    data, _ = read_yaml(path)
    try:
        suite = GateSuite.model_validate(data)
    except Exception as exc:  # pydantic's error -> the one-line form users get everywhere
        from pydantic import ValidationError

        if not isinstance(exc, ValidationError):
            raise
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise ConfigError(str(path), field, err["msg"]) from None
    if suite.include == "registry":
        suite.cases = registry_cases() + suite.cases
    if not suite.cases:
        raise ConfigError(str(path), "cases", "no cases (list some, or include: registry)")
    names = [c.name for c in suite.cases]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ConfigError(str(path), "cases", f"duplicate case name {sorted(dup)[0]!r}")
    return suite
