"""``falkirk`` as the registry and the conformance kit see it (contract v2)."""

from __future__ import annotations

from protocols.contract.actions import RECOVERING, SNAPSHOTTING
from protocols.contract.messages import SHARED_MESSAGES
from protocols.contract.spec import Guarantee, ProtocolSpec, Variant, fixed
from protocols.falkirk.coordinator import FalkirkCoordinator
from protocols.falkirk.instance import FalkirkInstance
from protocols.falkirk.messages import MESSAGES
from protocols.falkirk.mutants import MUTANTS
from protocols.falkirk.params import FalkirkParams

SPEC: ProtocolSpec[FalkirkParams] = ProtocolSpec(
    name="falkirk",
    paper="001 (Falkirk Wheel)",
    description="per-operator policies (ephemeral, log, batch, lazy/eager checkpoints); "
                "on failure the Figure 6 fixed point picks each instance's rollback "
                "frontier, only instances whose frontier moved roll back, logged edges "
                "replay as firewalls; GC under the low-watermark",
    params=FalkirkParams,
    instance=FalkirkInstance,
    coordinator=FalkirkCoordinator,
    guarantee=fixed(Guarantee.EXACTLY_ONCE),
    messages=(*SHARED_MESSAGES, *MESSAGES),
    phases=(RECOVERING, SNAPSHOTTING),
    variants=(Variant("default"),
              Variant("firewall", {"default_stateless": "log"}),
              Variant("eager-firewall", {"default_stateless": "log",
                                         "default_stateful": "eager+log"}),
              Variant("staggered", {"default_stateful": "lazy:3", "stagger": "on"})),
    mutants=MUTANTS,
    gate={"diamond": 50, "wordcount": 50, "windowed/firewall": 50, "diamond/firewall": 50},
)
