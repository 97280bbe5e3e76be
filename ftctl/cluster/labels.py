"""Worker labels (``rack=a``): failure domains that correlated faults can target.

Spark standalone has no notion of labels, so they live only in ftctl's state file.
A worker's labels are written ``key=value[,key=value...]``; a list of such specs is
assigned to workers in order and cycled when there are more workers than specs
(``--label rack=a --label rack=b`` on four workers gives a, b, a, b).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from itertools import cycle, islice

from ftctl.cluster.errors import LabelSyntaxError

Labels = dict[str, str]
LabelSpec = str | Mapping[str, str]

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
_VALUE = re.compile(r"^[A-Za-z0-9_.\-]+$")


def parse_label(text: str) -> tuple[str, str]:
    """Parse one ``key=value`` pair."""
    key, sep, value = text.strip().partition("=")
    key, value = key.strip(), value.strip()
    if not sep or not _KEY.match(key) or not _VALUE.match(value):
        raise LabelSyntaxError(
            f"bad label {text.strip()!r}: expected key=value with letters, digits, '_', '.', '-' "
            "(e.g. rack=a)"
        )
    return key, value


def parse_labels(spec: LabelSpec) -> Labels:
    """Parse one worker's labels: ``"rack=a,zone=1"`` or a mapping; ``""`` means none."""
    if isinstance(spec, Mapping):
        return dict(parse_label(f"{k}={v}") for k, v in spec.items())
    parts = [part for part in spec.split(",") if part.strip()]
    labels: Labels = {}
    for part in parts:
        key, value = parse_label(part)
        if key in labels and labels[key] != value:
            raise LabelSyntaxError(f"bad label set {spec!r}: {key} given twice")
        labels[key] = value
    return labels


def expand_labels(specs: Sequence[LabelSpec] | None, count: int) -> list[Labels]:
    """Labels for ``count`` workers: the specs in order, cycled; no specs means no labels."""
    if isinstance(specs, str):
        specs = [specs]  # a lone string is one spec, not a sequence of characters
    parsed = [parse_labels(spec) for spec in (specs or [])]
    if not parsed:
        return [{} for _ in range(count)]
    return [dict(labels) for labels in islice(cycle(parsed), count)]


def format_labels(labels: Mapping[str, str]) -> str:
    """``{"rack": "a", "zone": "1"}`` -> ``"rack=a,zone=1"`` (the form the CLI accepts)."""
    return ",".join(f"{key}={value}" for key, value in labels.items())


def matches(labels: Mapping[str, str], selector: LabelSpec) -> bool:
    """Whether ``labels`` contain every ``key=value`` of ``selector``."""
    wanted = parse_labels(selector)
    return all(labels.get(key) == value for key, value in wanted.items())
