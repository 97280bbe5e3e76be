"""The report of one stored run: verdict, oracle, recovery, events and plots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ftctl.report.html import esc, image, page, table, verdict_badge
from ftctl.results import RunStore, atomic_write_bytes


def run_summary(run: RunStore) -> dict[str, Any]:
    cfg = run.read_config()
    verdict = run.read_verdict() or {}
    recovery_path = run.path / "recovery.json"
    recovery = json.loads(recovery_path.read_text()) if recovery_path.exists() else None
    return {
        "run_id": run.run_id, "status": run.status(), "passed": run.passed(),
        "topology": cfg.get("topology", {}).get("name"), "protocol": cfg.get("protocol"),
        "params": cfg.get("params", {}), "verdict": verdict, "recovery": recovery,
    }


def render_run(run: RunStore) -> str:
    s = run_summary(run)
    v = s["verdict"]
    sections = [
        f"<p>run <code>{esc(s['run_id'])}</code>: topology <b>{esc(s['topology'])}</b> under "
        f"<b>{esc(s['protocol'])}</b> {esc(s['params'] or '')}; status {esc(s['status'])}; "
        f"{verdict_badge(bool(s['passed']))} (judged {esc(v.get('guarantee', '?'))})</p>",
        "<h2>Sinks</h2>",
        table(["sink", "mode", "golden", "output", "lost", "duplicated", "unexpected",
               "reordered"],
              [[x["sink"], x["mode"], x["golden_records"], x["output_records"], x["lost"],
                x["duplicated"], x["unexpected"], x["reordered"]] for x in v.get("sinks", [])],
              "sinks"),
    ]
    divs = [[x["sink"], d["key"], d["index"], d["expected"], d["actual"]]
            for x in v.get("sinks", []) for d in x.get("divergences", [])]
    if divs:
        sections += ["<h3>First divergence per key</h3>",
                     table(["sink", "key", "index", "expected", "actual"], divs)]
    oracle = v.get("oracle")
    if oracle:
        sections.append(f"<h2>Oracle</h2><p>{esc(oracle.get('oracle'))}: "
                        f"{verdict_badge(bool(oracle.get('passed')))}, {oracle.get('keys')} keys, "
                        f"{oracle.get('total_mismatches')} mismatches</p>")
    if s["recovery"]:
        sections += ["<h2>Recovery</h2>", _recovery_table(s["recovery"])]
    events = run.read_events()
    notable = [e for e in events if e.get("kind") not in ("metrics",)][:200]
    sections += ["<h2>Events</h2>",
                 table(["t (s)", "event", "details"],
                       [[round(float(e.get("t", 0)), 3), e.get("kind"),
                         {k: x for k, x in e.items() if k not in ("t", "wall", "kind")}]
                        for e in notable], "events")]
    pngs = sorted(run.path.glob("*.png"))
    if pngs:
        sections += ["<h2>Plots</h2>", *(image(p) for p in pngs)]
    return page(f"ftctl run {s['run_id']}", sections, data=s)


def _recovery_table(recovery: Any) -> str:
    faults = recovery.get("faults", []) if isinstance(recovery, dict) else []
    cols = ["fault", "target", "detection_s", "restart_s", "first_output_s", "recovery_s",
            "recovery_1_2x_s", "throughput_dip"]
    rows = [[f.get(c) for c in cols] for f in faults]
    return table(cols, rows, "recovery")


def write_run_report(run: RunStore, path: Path | None = None) -> Path:
    target = path or run.path / "report.html"
    atomic_write_bytes(target, render_run(run).encode())
    return target
