"""Protocols, the kernel and the runtime read no clock of their own: every time they see
is the ``now`` the host hands them, on the unit's clock (ftctl/kernel/clocks.py). A module
there that imports ``time`` or ``datetime`` would read the system's time, which clock
faults cannot reach and the simulation does not replay; this fails naming it."""

from __future__ import annotations

from collections.abc import Mapping

from tests.test_layering import imports, repo_sources

PURE = ("protocols", "ftctl.kernel", "ftctl.runtime")
CLOCKS = ("time", "datetime")


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def wall_clock_reads(sources: Mapping[str, tuple[str, bool]]) -> list[str]:
    found: dict[str, str] = {}  # "module:line" -> the clock it imports
    for m, (src, pkg) in sources.items():
        if _under(m, PURE):
            for line, target in imports(m, src, pkg):
                if _under(target, CLOCKS):
                    found.setdefault(f"{m}:{line}", target)
    return sorted(f"{where} imports {what}" for where, what in found.items())


def test_no_protocol_kernel_or_runtime_module_reads_the_system_clock() -> None:
    sources = repo_sources()
    assert any(_under(m, ("protocols.replica_ring",)) for m in sources)
    assert wall_clock_reads(sources) == []


def test_a_protocol_reading_wall_time_is_caught() -> None:
    planted = {
        "protocols.replica_ring.ring": "import time\nDEADLINE = time.monotonic()",
        "protocols.checkpoint.instance": "def f():\n    from time import time\n    return time()",
        "ftctl.kernel.unit": "from datetime import datetime",
        "ftctl.sim.host": "import time",  # a host may: it owns the true clock
    }
    found = wall_clock_reads({m: (src, False) for m, src in planted.items()})
    assert [f.split(" ")[0] for f in found] == [
        "ftctl.kernel.unit:1", "protocols.checkpoint.instance:2", "protocols.replica_ring.ring:1"]
