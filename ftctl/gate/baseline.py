"""Baselines: the metrics a suite's cases reached when they were last accepted."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from ftctl.config.errors import ConfigError

Metrics = dict[str, dict[str, float]]  # case -> metric -> value


def read_baseline(path: Path) -> Metrics:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(str(path), None, f"not a baseline file: {exc}") from None
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, dict):
        raise ConfigError(str(path), "cases", "expected a mapping of case -> metrics")
    return {c: {k: float(v) for k, v in m.items()} for c, m in cases.items()}


def write_baseline(path: Path, suite: str, metrics: Metrics) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = json.dumps({"suite": suite, "cases": metrics}, indent=2, sort_keys=True) + "\n"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".baseline-")
    with os.fdopen(fd, "w") as f:
        f.write(body)
    os.replace(tmp, path)


def regressions(current: dict[str, float], baseline: dict[str, float], tolerance: float,
                slack: dict[str, float]) -> list[str]:
    """Metrics that grew past baseline x (1 + tolerance) + slack; lower is better for all."""
    found = []
    for metric, base in sorted(baseline.items()):
        if metric not in current:
            continue
        limit = base * (1 + tolerance) + slack.get(metric, 0.0)
        if current[metric] > limit:
            found.append(f"{metric} {current[metric]:g} > {limit:g} "
                         f"(baseline {base:g}, tolerance {tolerance:.0%})")
    return found
