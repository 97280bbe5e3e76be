"""Loading a script of ``benchmarks/`` (not a package) as a module, to test it small."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def load_benchmark(name: str) -> Any:
    """``benchmarks/<name>.py`` as a module (its ``main`` is not run)."""
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench
