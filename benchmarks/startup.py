"""CPU time of `ftctl validate` and `ftctl --help` start-up (median of N runs).

    python benchmarks/startup.py [--runs 5]

CPU time (user + system of the child), not wall time, so a loaded machine changes the
figure less. The config commands import only the config modules (ftctl/cli.py).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = {
    "validate": ["validate", str(ROOT / "topologies" / "wordcount.yaml")],
    "--help": ["--help"],
}


def cpu_seconds(args: list[str]) -> float:
    before = os.times()
    subprocess.run([sys.executable, "-m", "ftctl.cli", *args], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = os.times()
    return (after.children_user - before.children_user
            + after.children_system - before.children_system)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    for name, args in COMMANDS.items():
        times = [cpu_seconds(args) for _ in range(runs)]
        print(f"ftctl {name}: median {statistics.median(times):.2f} s CPU "
              f"(min {min(times):.2f}, {runs} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
