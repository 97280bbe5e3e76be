"""The local cluster backend of the Spark host: standalone daemons as local processes, and
what every backend shares (state file, lifecycle, teardown, abandoned clusters). The docker
backend (``ftctl.docker``) builds on it; ``ftctl.backends.make_cluster`` picks one."""

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
    "require_java",
]
