"""PNG plots of a run: throughput, latency and available queries, with faults shaded.

Figures are built on matplotlib's object API with the Agg canvas directly, never
through pyplot: no global backend switch, no display needed, and safe to call from a
host's worker thread. Each file is written atomically like the rest of a run directory.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ftctl.metrics.recovery import Availability, FaultRecovery, FaultWindow, Series
from ftctl.results import atomic_write_bytes

THROUGHPUT_PNG = "throughput.png"
LATENCY_PNG = "latency.png"
AVAILABILITY_PNG = "available-queries.png"
_SIZE = (9.0, 3.6)
_DPI = 110
_FAULT_COLOR = "tab:red"


def write_plots(
    run_dir: Path,
    *,
    throughput: Series,
    latency_p50: Series,
    latency_p99: Series | None = None,
    faults: Sequence[FaultWindow] = (),
    recoveries: Sequence[FaultRecovery] = (),
    availability: Availability | None = None,
    title: str = "",
) -> list[Path]:
    """Write the run's plots into ``run_dir``; returns the files written.

    A fault is shaded from inject to heal, or to when output latency recovered (10%
    definition) for faults without a heal (kills); a fault with neither gets a line.
    The available-queries plot is written only when there is more than one sink.
    """
    run_dir = Path(run_dir)
    spans = fault_spans(faults, recoveries)
    written = []

    fig, ax = _figure(f"{title} throughput".strip())
    _line(ax, throughput, "records/s", "tab:blue")
    ax.set_ylabel("records / s")
    _shade(ax, spans)
    written.append(_save(fig, run_dir / THROUGHPUT_PNG))

    fig, ax = _figure(f"{title} output latency".strip())
    _line(ax, latency_p50, "p50", "tab:green")
    if latency_p99:
        _line(ax, latency_p99, "p99", "tab:orange")
    ax.set_ylabel("latency (s)")
    _shade(ax, spans)
    written.append(_save(fig, run_dir / LATENCY_PNG))

    if availability is not None and availability.total > 1:
        fig, ax = _figure(f"{title} available queries".strip())
        ax.step(availability.t, availability.available, where="post", color="tab:purple",
                label="available (relative latency <= threshold)")
        ax.set_ylim(-0.2, availability.total + 0.2)
        ax.set_ylabel(f"queries (of {availability.total})")
        _shade(ax, spans)
        written.append(_save(fig, run_dir / AVAILABILITY_PNG))
    return written


def fault_spans(
    faults: Sequence[FaultWindow], recoveries: Sequence[FaultRecovery] = ()
) -> list[tuple[float, float | None, str]]:
    """(start, end or None, label) per fault: end = heal, else recovered, else None."""
    recovered = {r.t_fault: r.t_recovered for r in recoveries}
    spans = []
    for f in faults:
        end = f.heal if f.heal is not None else recovered.get(f.t)
        label = f"{f.fault} {f.target}".strip() or "fault"
        spans.append((f.t, end, label))
    return spans


def _figure(title: str) -> tuple[Figure, Axes]:
    fig = Figure(figsize=_SIZE, dpi=_DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_title(title)
    ax.set_xlabel("run time (s)")
    ax.grid(True, alpha=0.3)
    return fig, ax


def _line(ax: Axes, series: Series, label: str, color: str) -> None:
    if series:
        xs, ys = zip(*series, strict=True)
        ax.plot(xs, ys, label=label, color=color, linewidth=1.0)


def _shade(ax: Axes, spans: list[tuple[float, float | None, str]]) -> None:
    for i, (start, end, label) in enumerate(spans):
        # One legend entry for all faults: a legend line per kill drowns the plot.
        name = "fault" if i == 0 else None
        if end is not None and end > start:
            ax.axvspan(start, end, color=_FAULT_COLOR, alpha=0.15, label=name)
        else:
            ax.axvline(start, color=_FAULT_COLOR, alpha=0.6, linestyle="--", label=name)
        ax.annotate(label, (start, 1.0), xycoords=("data", "axes fraction"), fontsize=7,
                    rotation=90, va="top", ha="right", color=_FAULT_COLOR)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper right", fontsize=8)


def _save(fig: Figure, path: Path) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    atomic_write_bytes(path, buf.getvalue())
    return path
