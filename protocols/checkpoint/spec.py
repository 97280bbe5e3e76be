"""``checkpoint`` as the registry and the conformance kit see it (contract v2)."""

from __future__ import annotations

from protocols.checkpoint.coordinator import CheckpointCoordinator
from protocols.checkpoint.instance import CheckpointInstance
from protocols.checkpoint.mutants import MUTANTS
from protocols.checkpoint.params import CheckpointParams
from protocols.contract.actions import RECOVERING, SNAPSHOTTING
from protocols.contract.messages import SHARED_MESSAGES
from protocols.contract.spec import Guarantee, ProtocolSpec, Variant, fixed

SPEC: ProtocolSpec[CheckpointParams] = ProtocolSpec(
    name="checkpoint",
    paper="003 (Noir)",
    description="snapshot tokens with channel state (or aligned), global rollback, "
                "transactional sinks",
    params=CheckpointParams,
    instance=CheckpointInstance,
    coordinator=CheckpointCoordinator,
    guarantee=fixed(Guarantee.EXACTLY_ONCE),
    messages=SHARED_MESSAGES,
    phases=(RECOVERING, SNAPSHOTTING),
    # aligned with one snapshot kept: a damaged one falls back to the initial state
    variants=(Variant("default"), Variant("aligned", {"alignment": "aligned"}),
              Variant("aligned-keep-1", {"alignment": "aligned", "keep": 1})),
    mutants=MUTANTS,
    gate={"wordcount": 150, "wordcount/aligned": 150, "diamond": 150, "windowed": 150,
          "sharder": 100},
)
