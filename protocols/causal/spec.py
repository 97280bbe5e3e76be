"""``causal`` as the registry and the conformance kit see it (contract v2)."""

from __future__ import annotations

from protocols.causal.coordinator import CausalCoordinator
from protocols.causal.instance import CausalInstance
from protocols.causal.messages import MESSAGES
from protocols.causal.mutants import MUTANTS
from protocols.causal.params import CausalParams
from protocols.contract.actions import RECOVERING, REPLAYING, SNAPSHOTTING
from protocols.contract.messages import SHARED_MESSAGES
from protocols.contract.spec import Guarantee, ProtocolSpec, fixed
from protocols.shared.logged import MESSAGES as LOGGED_MESSAGES

SPEC: ProtocolSpec[CausalParams] = ProtocolSpec(
    name="causal",
    paper="000",
    description="tree-clock causal logging: only failed instances restart, from local "
                "snapshots, replaying their children's observed order; per-channel seq "
                "de-duplication",
    params=CausalParams,
    instance=CausalInstance,
    coordinator=CausalCoordinator,
    guarantee=fixed(Guarantee.EXACTLY_ONCE),
    messages=(*SHARED_MESSAGES, *LOGGED_MESSAGES, *MESSAGES),
    phases=(RECOVERING, SNAPSHOTTING, REPLAYING),
    mutants=MUTANTS,
    gate={"wordcount": 100, "sharder": 40},
)
