"""Protocol contract v2: the pure types a protocol is written against.

``from protocols.contract import *`` gives a protocol author everything: names, messages,
events in, actions out, views, params and the spec. Nothing here does I/O, reads a clock
or draws random numbers; the kernel (``ftctl/kernel/``) interprets the actions.
"""

from protocols.contract.actions import (
    AdoptSlot,
    CancelTimer,
    Chain,
    CommitOutput,
    Control,
    CoordinatorAction,
    DeclarePhase,
    DiscardSnapshots,
    DiscardStaged,
    Emit,
    InstanceAction,
    Note,
    Persist,
    ReleaseSlot,
    Report,
    Restart,
    RollBack,
    Route,
    Send,
    SendPeer,
    SetTimer,
    StageOutput,
    Stop,
    Suspect,
)
from protocols.contract.events import (
    BatchIn,
    CapacityChanged,
    ControlIn,
    CoordinatorEvent,
    FailureDetected,
    InstanceEvent,
    InstanceRunning,
    MarkerIn,
    PeerIn,
    ReportIn,
    RollBackTo,
    RunStarted,
    SourceReady,
    Started,
    Suspected,
    TimerFired,
)
from protocols.contract.logic import CoordinatorLogic, InstanceLogic, core_actions
from protocols.contract.messages import SHARED_MESSAGES, Ended, InputEnded, Msg, Offset, Persisted
from protocols.contract.names import (
    KV,
    Blob,
    ChannelId,
    InstanceId,
    LogicalTime,
    SnapshotRef,
    UnitId,
)
from protocols.contract.params import (
    NoParams,
    ParamError,
    ProtocolParams,
    RunShape,
    parse_items,
    validate,
)
from protocols.contract.spec import Guarantee, Mutant, ProtocolSpec, Variant, fixed
from protocols.contract.view import Capacity, ClusterView, GraphView, InstanceView, NodeView

__all__ = [
    "KV", "SHARED_MESSAGES", "AdoptSlot", "BatchIn", "Blob", "CancelTimer", "Capacity",
    "CapacityChanged", "Chain", "ChannelId", "ClusterView", "CommitOutput", "Control", "ControlIn",
    "CoordinatorAction", "CoordinatorEvent", "CoordinatorLogic", "DeclarePhase",
    "DiscardSnapshots", "DiscardStaged", "Emit", "Ended", "FailureDetected", "GraphView",
    "Guarantee", "InputEnded", "InstanceAction", "InstanceEvent", "InstanceId",
    "InstanceLogic", "InstanceRunning", "InstanceView", "LogicalTime", "MarkerIn", "Msg",
    "Mutant", "NoParams", "NodeView", "Note", "Offset", "ParamError", "PeerIn", "Persist",
    "Persisted", "ProtocolParams", "ProtocolSpec", "ReleaseSlot", "Report", "ReportIn",
    "Restart", "RollBack", "RollBackTo", "Route", "RunShape", "RunStarted", "Send",
    "SendPeer", "SetTimer", "SnapshotRef", "SourceReady", "StageOutput", "Started", "Stop",
    "Suspect", "Suspected", "TimerFired", "UnitId", "Variant", "core_actions", "fixed",
    "parse_items", "validate",
]
