"""What the ``ftctl.protocols`` entry point names: the protocol as ftctl sees it."""

from __future__ import annotations

from protocols.contract import SHARED_MESSAGES, Guarantee, ProtocolSpec, fixed
from protocols.shared.logged import MESSAGES as LOG_MESSAGES

from .coordinator import Coordinator
from .instance import Instance
from .messages import LocalSnapshot
from .mutants import MUTANTS
from .params import Params

SPEC: ProtocolSpec[Params] = ProtocolSpec(
    name="protocol-skeleton",  # the entry point's name wins when they differ
    paper="-",
    description="restart a failed instance from its last local snapshot, replay its inputs "
                "from the upstream logs; inputs read in a fixed rotation",
    params=Params,
    instance=Instance,
    coordinator=Coordinator,
    guarantee=fixed(Guarantee.EXACTLY_ONCE),
    messages=(*SHARED_MESSAGES, *LOG_MESSAGES, LocalSnapshot),
    mutants=MUTANTS,
)
