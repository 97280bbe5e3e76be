"""Topology files. The model is the runtime's (``ftctl.runtime.topology``); configuration
loads it (``ftctl.config.load``) and checks it (``ftctl.config.checks``)."""

from ftctl.runtime.topology import (
    EdgeSpec,
    InputSpec,
    OperatorSpec,
    Partitioning,
    QuerySpec,
    RateChange,
    SinkMode,
    SourceInput,
    Topology,
)

__all__ = ["EdgeSpec", "InputSpec", "OperatorSpec", "Partitioning", "QuerySpec", "RateChange",
           "SinkMode", "SourceInput", "Topology"]
