"""ftctl compare protocols on a local Spark cluster: one schedule, every protocol."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import psutil
import pytest

from ftctl.cluster import LocalCluster
from tests.conftest import ROOT

pytestmark = pytest.mark.spark
# Two recoveries of different scope: a global rollback and a rollback frontier. (causal,
# lineage and none run on Spark in test_causal_spark, test_chaos_spark and
# test_spark_host; each protocol here costs a run of its own, about 45 s.)
PROTOCOLS = ["checkpoint", "falkirk"]


class _ProtocolRows(HTMLParser):
    """Rows of the table with id=protocols, its header row ("protocol", ...) included."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = False
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.inside = dict(attrs).get("id") == "protocols"
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.inside = False
        elif tag in ("td", "th") and self._cell is not None and self.rows:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


@pytest.mark.skipif(shutil.which("java") is None, reason="needs Java 17+ for Spark")
def test_compare_protocols_under_single_kill(tmp_path: Path,
                                            spark_cluster: LocalCluster) -> None:
    # On the session's warm cluster: every protocol's run attaches to it, as a user's
    # `--master` would (a cluster of its own costs about 20 s of this test).
    before = {p.pid for p in psutil.process_iter()}
    proc = subprocess.run(
        [sys.executable, "-m", "ftctl.cli", "compare", "protocols",
         str(ROOT / "topologies/wordcount.yaml"), "--master", spark_cluster.master_url,
         "--scenario", str(ROOT / "chaos/single-kill.yaml"),
         "--protocols", ",".join(PROTOCOLS), "--records", "4000", "--rate", "500",
         "--results", str(tmp_path), "--json"],
        capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    by_proto = {p["protocol"]: p for p in doc["protocols"]}
    assert list(by_proto) == PROTOCOLS
    for name in PROTOCOLS:
        fig = by_proto[name]
        assert fig["guarantee_held"], fig
        assert fig["lost"] == 0 and fig["duplicated"] == 0
        assert fig["detection_s"] is not None and fig["detection_s"] < 5
        # Output again after the kill: never before the failure was detected. (A protocol
        # that rolls back can end the run without output after its restart: the replayed
        # records were all visible already.)
        if fig["first_output_s"] is not None:
            assert fig["detection_s"] <= fig["first_output_s"] < 60
    assert by_proto["checkpoint"]["snapshot_bytes"] > 0
    # The scope of recovery: checkpoint rolls the whole graph back, falkirk only what must.
    n_instances = 6  # wordcount: source, 2 splits, 2 counts, sink
    assert by_proto["checkpoint"]["restarts"] == n_instances
    assert 1 <= by_proto["falkirk"]["restarts"] < n_instances
    # Every run after the first replayed the first one's recorded schedule.
    recorded = doc["recorded_from"]
    for run_id in [r["run_id"] for r in doc["runs"]][1:]:
        cfg = json.loads((tmp_path / run_id / "config.json").read_text())
        assert recorded in cfg["chaos"]["schedule"]
    html = (Path(doc["path"]) / "report.html").read_text()
    parser = _ProtocolRows()
    parser.feed(html)
    rows = {r[0]: r for r in parser.rows if r}
    header = rows.pop("protocol")  # columns found by name: new columns may come in between
    assert set(rows) == set(PROTOCOLS)
    detect_col = header.index("detection (s)")
    restarted_col = header.index("instances restarted")
    assert rows["falkirk"][restarted_col] == f"{by_proto['falkirk']['restarts']:,.0f}"
    first_col = header.index("first output (s)")
    for name in PROTOCOLS:  # shown to 10 ms
        assert float(rows[name][detect_col]) == pytest.approx(by_proto[name]["detection_s"],
                                                              abs=0.006)
        if by_proto[name]["first_output_s"] is not None:
            assert float(rows[name][first_col]) == pytest.approx(
                by_proto[name]["first_output_s"], abs=0.006)
    assert "plotly.js v" in html and 'id="verdict"' in html  # interactive, inlined
    # Nothing the command started (its drivers, anything it put under tmp_path) is left.
    leftover = [p for p in psutil.process_iter(["pid", "cmdline"])
                if p.info["pid"] not in before
                and str(tmp_path) in " ".join(p.info["cmdline"] or [])]
    assert not leftover, leftover
