"""The Spark host's fault classes by kind: what the registry (``ftctl.config.fault_kinds``)
names as each kind's ``spark`` realization. Kinds with none (the store's) are refused
before a Spark run starts (``chaos.plan.check_delivery``)."""

from __future__ import annotations

from chaos.faults import ChaosFault
from ftctl.config.fault_kinds import FAULT_TYPES, realization

FAULTS: dict[str, type[ChaosFault]] = {
    name: realization(kind.spark) for name, kind in FAULT_TYPES.items() if kind.spark
}
assert all(cls.name == name for name, cls in FAULTS.items()), "a class realizes another kind"
