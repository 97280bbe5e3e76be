"""Configuration: topology and chaos-scenario files, validated with pydantic."""

from ftctl.config.errors import ConfigError
from ftctl.config.topology import EdgeSpec, InputSpec, OperatorSpec, Topology

__all__ = ["ConfigError", "EdgeSpec", "InputSpec", "OperatorSpec", "Topology"]
