"""The comparison's table data, plots and self-contained HTML report."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from ftctl.compare.figures import ProtocolFigures
from ftctl.compare.runner import Comparison
from ftctl.report.html import esc, image, page, table, verdict_badge

# Two tables, so each fits a terminal: what happened, and what it cost.
OUTCOME = [
    ("protocol", "protocol"), ("guarantee", "guarantee"), ("held", "guarantee_held"),
    ("lost", "lost"), ("dup", "duplicated"), ("detect s", "detection_s"),
    ("restart s", "restart_s"), ("recover s", "recovery_s"), ("spread s", "recovery_spread_s"),
]
COST = [
    ("protocol", "protocol"), ("rec/s", "throughput_rps"), ("thr ovh", "throughput_overhead"),
    ("p50 s", "latency_p50_s"), ("lat ovh", "latency_overhead"),
    ("processed", "records_processed"), ("snapshots B", "snapshot_bytes"),
]
COLUMNS = OUTCOME + COST[1:]
# What the short headers mean (printed under the tables).
LEGEND = {
    "held": "guarantee held", "dup": "duplicated records",
    "detect s": "fault to detection (median)", "restart s": "fault to restart (median)",
    "recover s": "fault to latency back within 10% (median)",
    "spread s": "max - min recovery over repeats", "rec/s": "sink records/s",
    "thr ovh": "throughput overhead vs none", "p50 s": "median output latency",
    "lat ovh": "latency overhead vs none", "processed": "records all instances received",
    "snapshots B": "snapshot bytes stored",
}


def row(f: ProtocolFigures, columns: list[tuple[str, str]] = COLUMNS) -> list[object]:
    return [getattr(f, attr) for _, attr in columns]


def plot_latency(comp: Comparison, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(9, 4))
    for proto, samples in comp.latency.items():
        if samples:
            xs, ys = zip(*sorted(samples), strict=True)
            ax.plot(xs, ys, lw=0.8, label=proto)
    ax.set_xlabel("time into the run (s)")
    ax.set_ylabel("sink output latency (s)")
    ax.set_title(f"{comp.topology}: latency under {comp.schedule}")
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_recovery(comp: Comparison, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 3.5))
    names = [p.protocol for p in comp.protocols]
    values = [p.recovery_s or 0.0 for p in comp.protocols]
    spread = [(p.recovery_spread_s or 0.0) / 2 for p in comp.protocols]
    ax.bar(names, values, yerr=spread, capsize=4, color="#4c72b0")
    ax.set_ylabel("recovery time, median (s)")
    ax.set_title("recovery time per protocol")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def render(comp: Comparison, folder: Path) -> str:
    plots = [plot_latency(comp, folder / "latency.png"),
             plot_recovery(comp, folder / "recovery.png")]
    sections = [
        f"<p>topology <b>{esc(comp.topology)}</b>, schedule <b>{esc(comp.schedule)}</b> "
        f"recorded by run <code>{esc(comp.recorded_from)}</code> and replayed for every "
        f"protocol, {comp.repeat} run(s) each.</p>",
        "<h2>Protocols</h2>",
        table([c for c, _ in COLUMNS], [row(p) for p in comp.protocols], "protocols"),
        "<p>" + " ".join(f"{esc(p.protocol)}: {verdict_badge(p.guarantee_held)}"
                         for p in comp.protocols) + "</p>",
        "<h2>Runs</h2>",
        table(["run", "protocol", "passed", "lost", "duplicated", "detect s", "recover s",
               "seconds"],
              [[r.run_id, r.protocol, r.passed, r.lost, r.duplicated, r.detection_s,
                r.recovery_s, r.seconds] for r in comp.runs], "runs"),
        "<h2>Plots</h2>", *(image(p) for p in plots),
    ]
    if comp.failed_runs:
        sections.append(f"<p class='fail'>runs that did not finish: "
                        f"{esc(', '.join(comp.failed_runs))}</p>")
    return page(f"ftctl compare: {comp.topology}", sections, data=comp.to_json())
