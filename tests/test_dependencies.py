"""What the installed libraries say to the user's terminal on their own."""

from __future__ import annotations

import subprocess
import sys


def test_pyspark_warns_of_no_library_version() -> None:
    # PySpark's DataFrame code imports pyspark.testing.utils, which checks the pandas
    # version; under pandas 3 it prints a FutureWarning in every run and figure. The
    # project pins what PySpark supports (pyproject.toml).
    # Python's default filters, as a user's run has them (as an error, PySpark's own check
    # would swallow it).
    done = subprocess.run([sys.executable, "-c", "import pyspark.testing.utils"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr, done.stderr
