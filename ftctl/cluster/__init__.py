"""Cluster backends for the Spark host. ``local``: standalone daemons as local processes;
``docker``: the same daemons as containers (``ftctl.docker``). ``make_cluster`` picks one."""

from ftctl.cluster.backends import BACKENDS, attach_cluster, detect_backend, make_cluster
from ftctl.cluster.errors import (
    ClusterError,
    ClusterUsageError,
    InfraError,
    JavaNotFoundError,
    LabelSyntaxError,
    NoClusterError,
    PortInUseError,
)
from ftctl.cluster.java import JavaInfo, require_java
from ftctl.cluster.local import ClusterStatus, LocalCluster, WorkerStatus
from ftctl.cluster.state import ClusterState, WorkerInfo

__all__ = [
    "BACKENDS",
    "ClusterError",
    "ClusterState",
    "ClusterStatus",
    "ClusterUsageError",
    "InfraError",
    "JavaInfo",
    "JavaNotFoundError",
    "LabelSyntaxError",
    "LocalCluster",
    "NoClusterError",
    "PortInUseError",
    "WorkerInfo",
    "WorkerStatus",
    "attach_cluster",
    "detect_backend",
    "make_cluster",
    "require_java",
]
