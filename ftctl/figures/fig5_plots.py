"""Paper 004's Fig. 5 for both hosts' runs (``fig_004_fig5.py``, ``fig_004_spark.py``):
its availability threshold Θ (``--opt threshold=``) and its two plots, (a) the mean
relative latency of the queries with output, (b) the available queries, per ``Δ_T`` step,
against seconds after the correlated failure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure

from ftctl.config.errors import ConfigError

DEFAULT_THRESHOLD = 1.2  # Θ of the paper: a query is available while RL <= Θ
THRESHOLD_HELP = (f"Θ: a query is available while its relative latency is <= this "
                  f"(default {DEFAULT_THRESHOLD:g}, the paper's)")


def threshold_of(options: Mapping[str, str]) -> float:
    """``--opt threshold=`` as a positive number, else a ConfigError naming it."""
    text = options.get("threshold", str(DEFAULT_THRESHOLD))
    try:
        theta = float(text)
    except ValueError:
        theta = float("nan")
    if not 0 < theta < float("inf"):
        raise ConfigError("--opt", "threshold", f"{text!r} is not a positive number")
    return theta


@dataclass(frozen=True)
class Curve:
    """One run: per step start (s after the failure), mean RL and available queries."""

    name: str
    t: Sequence[float]
    mean_rl: Sequence[float | None]
    available: Sequence[int]

    def first_available(self) -> float | None:
        """The first step at or after the failure with a query available."""
        return next((t for t, n in zip(self.t, self.available, strict=True)
                     if t >= 0 and n > 0), None)

    def peak_mean_rl(self) -> float | None:
        """The highest mean relative latency at or after the failure."""
        return max((v for t, v in zip(self.t, self.mean_rl, strict=True)
                    if t >= 0 and v is not None), default=None)


def plot_fig5(curves: Sequence[Curve], paths: tuple[Path, Path], *, threshold: float,
              host: str, titles: tuple[str, str], max_available: float) -> tuple[Path, Path]:
    """Writes (a) to ``paths[0]`` and (b) to ``paths[1]``; ``host`` names the clock in
    the x label, ``max_available`` tops (b)'s y axis."""
    for path, what, title in zip(paths, ("rl", "available"), titles, strict=True):
        fig = MplFigure(figsize=(8, 4.5), dpi=110)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        for c in curves:
            if what == "rl":
                pts = [(x, v) for x, v in zip(c.t, c.mean_rl, strict=True) if v is not None]
                ax.plot([x for x, _ in pts], [v for _, v in pts], marker=".", label=c.name)
            else:
                ax.step(c.t, c.available, where="post", label=c.name)
        ax.axvline(0.0, color="grey", lw=0.8)
        ax.set_xlabel(f"seconds after the correlated failure ({host})")
        if what == "rl":
            ax.set_yscale("log")
            ax.axhline(threshold, color="grey", ls="--", lw=0.8)
            ax.set_ylabel("mean relative latency of queries with output")
        else:
            ax.set_ylabel(f"available queries (running, RL <= {threshold:g})")
            ax.set_ylim(0, max_available)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.savefig(path)
    return paths
