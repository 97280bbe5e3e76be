"""JUnit XML, the format CI systems show test results in."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from ftctl.gate.runner import CaseResult


def write_junit(path: Path, suite: str, results: list[CaseResult]) -> None:
    failures = sum(1 for r in results if not r.passed)
    root = ET.Element("testsuites")
    ts = ET.SubElement(root, "testsuite", name=f"ftctl-gate.{suite}", tests=str(len(results)),
                       failures=str(failures), errors="0",
                       time=f"{sum(r.seconds for r in results):.3f}")
    for r in results:
        tc = ET.SubElement(ts, "testcase", classname=f"ftctl.gate.{suite}", name=r.name,
                           time=f"{r.seconds:.3f}")
        if not r.passed:
            fail = ET.SubElement(tc, "failure", message="; ".join(r.reasons)[:500])
            fail.text = r.details
        out = ET.SubElement(tc, "system-out")
        out.text = " ".join(f"{k}={v:g}" for k, v in sorted(r.metrics.items()))
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
