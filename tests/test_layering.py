"""Imports point down: commands -> run -> hosts -> kernel -> protocols -> runtime.

Every import in ftctl/, protocols/ and chaos/ (inside functions and under TYPE_CHECKING
too) is checked against the rules below; an edge that comes back fails here, naming the
file and line.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ftctl", "protocols", "chaos")


@dataclass(frozen=True)
class Rule:
    importers: tuple[str, ...]  # modules these prefixes cover may not import...
    forbidden: tuple[str, ...]  # ...modules under these prefixes
    allowed: tuple[str, ...] = ()  # except importers under these prefixes
    why: str = ""
    but: tuple[str, ...] = ()  # and except targets under these prefixes


HOSTS = ("ftctl.sim", "ftctl.spark")
ABOVE_HOSTS = ("ftctl.commands", "ftctl.cli", "ftctl.run", "ftctl.compare", "ftctl.gate",
               "ftctl.figures", "ftctl.conformance", "ftctl.engines")
RULES = (
    Rule(("ftctl", "protocols", "chaos"), ("ftctl.commands",),
         allowed=("ftctl.commands", "ftctl.cli"), why="only the CLI loads commands"),
    Rule(("ftctl", "protocols", "chaos"), ("ftctl.run",),
         allowed=("ftctl.run", "ftctl.commands", "ftctl.cli", "ftctl.compare",
                  "ftctl.figures",  # a Spark figure is a series of runs, like compare
                  "ftctl.engines"),  # an engine's run reports as a protocol's run does
         why="runs are driven from above the hosts"),
    Rule(("ftctl.verify",), HOSTS, why="verification judges outputs; a producer it is "
         "handed computes golden"),
    Rule(("ftctl.runtime",), ("ftctl",), but=("ftctl.runtime",),
         why="the runtime is the bottom layer (the topology model is its own)"),
    Rule(("ftctl.cluster",), ("ftctl.docker", "ftctl.backends"),
         why="backends build on the local cluster, never the other way round"),
    Rule(("ftctl.spark",), ("ftctl.sim",), why="one host does not borrow from the other"),
    Rule(("ftctl.sim",), ("ftctl.spark",), why="one host does not borrow from the other"),
    Rule(("ftctl.kernel",), HOSTS + ABOVE_HOSTS, why="hosts drive the kernel"),
    Rule(("protocols",), HOSTS + ABOVE_HOSTS + ("ftctl.kernel", "ftctl.config"),
         why="protocols are pure decision logic over the runtime"),
    Rule(("chaos",), HOSTS + ABOVE_HOSTS, why="faults act through a context a host gives"),
)


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(module: str, source: str, is_package: bool = False) -> Iterator[tuple[int, str]]:
    """(line, imported module) for every import statement, relative ones resolved."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield node.lineno, target
            for alias in node.names:  # "from ftctl import commands" imports ftctl.commands
                yield node.lineno, f"{target}.{alias.name}"


def violations(sources: Mapping[str, tuple[str, bool]]) -> list[str]:
    """Each broken rule as "module:line imports target (why)"; ``sources`` maps a module
    name to its source text and whether it is a package's __init__."""
    found: dict[tuple[str, int, Rule], str] = {}
    for module, (source, is_package) in sorted(sources.items()):
        for line, target in imports(module, source, is_package):
            for rule in RULES:
                if (_under(module, rule.importers) and not _under(module, rule.allowed)
                        and _under(target, rule.forbidden) and not _under(target, rule.but)):
                    found.setdefault((module, line, rule),
                                     f"{module}:{line} imports {target} ({rule.why})")
    return sorted(set(found.values()))


def repo_sources() -> dict[str, tuple[str, bool]]:
    return {module_name(p): (p.read_text(), p.name == "__init__.py")
            for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def test_imports_point_down() -> None:
    sources = repo_sources()
    assert len(sources) > 100 and "ftctl.run.execute" in sources
    assert violations(sources) == []


def test_a_returning_back_edge_is_caught() -> None:
    """Each edge the layering removed, put back, is reported; a downward one is not."""
    back = {
        "ftctl.compare.runner": "from ftctl.commands.chaos_cmd import ChaosExtension",
        "ftctl.verify.golden": "from ftctl.sim.golden import golden_output",
        "ftctl.runtime.graph": "from ftctl.config.topology import Topology",
        "ftctl.cluster.backends": "def make():\n    from ftctl.docker.cluster import DockerCluster",
        "ftctl.sim.scenario": "from ftctl.commands.chaos_plan import from_scenario",
        "protocols.lineage": "import ftctl.sim.host",
        "ftctl.spark.host": "from ftctl.sim import faults",
        "ftctl.verify": "from .. import sim",
    }
    found = violations({m: (src, m == "ftctl.verify") for m, src in back.items()})
    assert sorted(f.split(" ")[0] for f in found) == sorted(
        f"{m}:{src.count(chr(10)) + 1}" for m, src in back.items())
    down = {"ftctl.commands.run_cmd": "from ftctl.run.execute import execute",
            "ftctl.sim.runner": "from ftctl.verify.checker import verify",
            "ftctl.config.topology": "from ftctl.runtime.topology import Topology",
            "ftctl.docker.cluster": "from ftctl.cluster.local import LocalCluster",
            "protocols.falkirk.instance": "from ftctl.runtime.records import Record"}
    assert violations({m: (src, False) for m, src in down.items()}) == []
