"""``progressive`` as the registry and the conformance kit see it (contract v2)."""

from __future__ import annotations

from protocols.contract.actions import PLANNING, RECOVERING, SNAPSHOTTING
from protocols.contract.messages import SHARED_MESSAGES
from protocols.contract.spec import Guarantee, ProtocolSpec, Variant, fixed
from protocols.progressive.coordinator import ProgressiveCoordinator
from protocols.progressive.instance import ProgressiveInstance
from protocols.progressive.messages import MESSAGES
from protocols.progressive.mutants import MUTANTS
from protocols.progressive.params import ProgressiveParams

SPEC: ProtocolSpec[ProgressiveParams] = ProtocolSpec(
    name="progressive",
    paper="004 (progressive recovery)",
    description="punctuation checkpoints and source buffers; a burst of node failures "
                "turns on upstream buffering and order-preserving mini-batches; failed "
                "queries restart by profit density as capacity returns, re-planned at "
                "every arrival; per-channel sequence numbers drop replayed duplicates",
    params=ProgressiveParams,
    instance=ProgressiveInstance,
    coordinator=ProgressiveCoordinator,
    guarantee=fixed(Guarantee.EXACTLY_ONCE),
    messages=(*SHARED_MESSAGES, *MESSAGES),
    phases=(RECOVERING, SNAPSHOTTING, PLANNING),
    needs=frozenset({"capacity"}),
    variants=(Variant("default"),
              Variant("every-failure-progressive", {"burst_unit": "instances",
                                                    "burst_threshold": 0}),
              Variant("topological", {"schedule": "topological"}),
              Variant("blocking", {"schedule": "blocking"})),
    mutants=MUTANTS,
    gate={"progressive-small": 50, "diamond": 50},
)
