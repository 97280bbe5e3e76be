"""What the Spark figures share: one warm local cluster for every point, the request that
runs one point on it, and the parsing of their list options.

Each point is one ``execute`` run (``ftctl run``/``ftctl chaos`` machinery) handed to a
``Runner``: the real one in use, a fake in tests, so a figure's table is tested without
Spark.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure

from ftctl.backends import make_cluster
from ftctl.config.errors import ConfigError
from ftctl.config.topology import Topology
from ftctl.console import console
from ftctl.run.execute import EXIT_INTERRUPTED, RunExtension, RunRequest
from ftctl.runtime.topology import MAX_BATCH
from protocols.registry import get_protocol

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

WORKERS = 2
RUN_TIMEOUT = 900.0

Runner = Callable[[RunRequest, RunExtension], int]


def run_point(runner: Runner, request: RunRequest, ext: RunExtension) -> int:
    """``runner``'s exit code; Ctrl-C during the run (which ``execute`` turns into a code
    after tearing the run down) stops the whole figure instead of its next point."""
    code = runner(request, ext)
    if code == EXIT_INTERRUPTED:
        raise KeyboardInterrupt
    return code


@contextlib.contextmanager
def warm_cluster(master: str | None, cores: int, prefix: str) -> Iterator[str]:
    """The master URL to run every point on: ``master`` when given, else a local cluster
    started here and torn down on the way out, whatever happens in between."""
    if master is not None:
        yield master
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as state, make_cluster(
            "local", workers=WORKERS, cores=cores, state_dir=Path(state),
            owned=True) as cluster:
        console.print(f"{WORKERS}-worker local cluster up at {cluster.master_url}")
        yield cluster.master_url


def point_request(topology: Topology, protocol: str, master: str, runs: Path, figure: str,
                  run: str, spares: int | None = None,
                  timeout: float = RUN_TIMEOUT) -> RunRequest:
    """One run of ``protocol`` (a name, optionally ``name:key=value+key=value``) on the
    warm cluster, quiet, its run directory under ``runs``; ``config.json`` names the
    figure and the point."""
    name, _, spec = protocol.partition(":")
    given = _given(spec)
    info = get_protocol(name)
    extra: dict[str, Any] = {} if spares is None else {"spares": spares}
    return RunRequest(topology, info, info.resolve(given), master=master, workers=WORKERS,
                      results=runs, timeout=timeout, as_json=False, kind="figure",
                      quiet=True, config={"figure": figure, "run": run, "params": given},
                      **extra)


def number_list(opts: Mapping[str, str], key: str, default: tuple[float, ...],
                whole: bool = False) -> tuple[float, ...]:
    """``--opt key=a,b,c``: positive numbers (whole ones when ``whole``), or the default."""
    text = opts.get(key)
    if text is None:
        return default
    try:
        values = tuple((int if whole else float)(v.replace("_", "")) for v in text.split(","))
    except ValueError:
        values = ()
    if not values or any(v <= 0 for v in values):
        kind = "positive whole numbers" if whole else "positive numbers"
        raise ConfigError("--opt", key, f"{text!r} is not a comma-separated list of {kind}")
    return values


def positive(opts: Mapping[str, str], key: str, default: float, whole: bool = False) -> float:
    """``--opt key=x``: one positive number, or the default."""
    if key not in opts:
        return default
    values = number_list(opts, key, (default,), whole)
    if len(values) != 1:
        raise ConfigError("--opt", key, f"{opts[key]!r} is one number, not a list")
    return values[0]


def batch(opts: Mapping[str, str]) -> int | None:
    """``--opt batch=B``: records per source batch, or None for the topology's own."""
    if "batch" not in opts:
        return None
    size = int(positive(opts, "batch", 1, whole=True))
    if size > MAX_BATCH:
        raise ConfigError("--opt", "batch", f"{size:,} records, more than a batch holds "
                          f"({MAX_BATCH:,})")
    return size


def batch_note(size: int | None) -> str:
    """What a figure's title adds for ``--opt batch``: nothing for the topology's own."""
    return "" if size is None else f", {size:g} votes a batch"


BATCH_HELP = ("records per source batch (default: the topology's, 100); a Spark run's "
              "cost is mostly per batch (docs/protocols.md, Figure 2 at 200M votes)")


def protocol_list(opts: Mapping[str, str], default: tuple[str, ...]) -> tuple[str, ...]:
    """``--opt protocols=a,b:key=value+key=value``: each protocol known and its parameters
    valid, checked before any cluster starts."""
    text = opts.get("protocols")
    names = default if text is None else tuple(p.strip() for p in text.split(",") if p.strip())
    if not names:
        raise ConfigError("--opt", "protocols", "an empty list")
    for p in names:
        name, _, spec = p.partition(":")
        try:
            get_protocol(name).resolve(_given(spec))
        except (KeyError, ValueError) as exc:
            # a KeyError's str() quotes its message
            raise ConfigError("--opt", "protocols", str(exc.args[0] if exc.args else exc)) \
                from None
    return names


def _given(spec: str) -> dict[str, str]:
    pairs = [kv.split("=", 1) for kv in spec.split("+") if kv]
    if any(len(kv) != 2 for kv in pairs):
        raise ValueError(f"{spec!r}: parameters are key=value joined by +")
    return dict((k, v) for k, v in pairs)


P = TypeVar("P", bound="DataclassInstance")  # a point with a ``load`` field


def announce(point: P) -> P:
    """The point with the machine's load average now, printed as one JSON line as it
    comes in (a long sweep shows its progress; a cut-short one keeps what it had)."""
    got = replace(point, load=round(os.getloadavg()[0], 1))
    console.print(json.dumps(asdict(got)), highlight=False, soft_wrap=True)
    return got


def line_plot(png: Path, size: tuple[float, float], draw: Callable[[Axes], None],
              labels: tuple[str, str, str], log: bool = False) -> Path:
    """One panel: ``draw`` adds the lines; ``labels`` are x, y and the title."""
    fig = MplFigure(figsize=size, dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    draw(ax)
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel(labels[0])
    ax.set_ylabel(labels[1])
    ax.set_title(labels[2], fontsize=9)
    if ax.lines:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png)
    return png
