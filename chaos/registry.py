"""Every fault type by name: the process-level ones (``chaos.faults``) and the container
ones (``chaos.containers``, which build on ``chaos.faults``, hence a module of its own)."""

from __future__ import annotations

from chaos.containers import CONTAINER_FAULT_CLASSES
from chaos.faults import FAULT_CLASSES, ChaosFault
from ftctl.config.scenario import FAULT_TYPES

FAULTS: dict[str, type[ChaosFault]] = {
    cls.name: cls for cls in (*FAULT_CLASSES, *CONTAINER_FAULT_CLASSES)
}
assert set(FAULTS) == set(FAULT_TYPES), "every fault type needs a class"
