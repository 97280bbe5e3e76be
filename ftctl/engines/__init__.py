"""Stream-processing engines ftctl tests beside its own protocols.

An engine is not a protocol of the kernel: it brings its own fault tolerance and runs a
topology in its own processes. ``-p NAME`` selects one where ``run``, ``chaos``,
``compare`` and ``validate`` dispatch (``ftctl.engines.structured``: Spark Structured
Streaming).
"""

from __future__ import annotations

STRUCTURED = "structured-streaming"


def engine_of(protocol: str) -> tuple[str, str | None] | None:
    """``(engine, mutant)`` when ``protocol`` names an engine (``NAME`` or
    ``NAME/MUTANT``), else None."""
    name, _, mutant = protocol.partition("/")
    if name != STRUCTURED:
        return None
    return name, mutant or None
