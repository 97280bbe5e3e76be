"""The oracle's expected values, kept between runs in the machine-wide cache.

An oracle's answer depends on the topology's input (its sources' params, records and
seed) and on the code that regenerates the input and states the query, never on a run.
Computing it is a Spark job of its own (Python workers on the executors, then the SQL
query): 10-14 s of every `ftctl run` or `ftctl chaos` on a busy 2-core machine, longer
than many runs it checks. So the answer is kept under a hash of both in
``$FTCTL_CACHE_DIR/oracle`` (docs/topologies.md, Oracles); a change to either computes
it afresh, and an entry that does not read back is computed again.
"""

from __future__ import annotations

import contextlib
import pickle
from pathlib import Path
from typing import Any

from ftctl.docker.cache import cache_dir, digest
from ftctl.results import atomic_write_bytes

_REPO = Path(__file__).resolve().parent.parent.parent
# What an oracle's answer is computed by: the queries and rows, and the input generators.
_ORACLE_CODE = ("ftctl/verify/oracle.py", "ftctl/verify/nexmark_oracle.py",
                "ftctl/runtime/sources.py", "ftctl/runtime/nexmark.py",
                "ftctl/runtime/records.py")


def oracle_key(input_json: str, oracle: str) -> str:
    """The entry's name: a hash of the input (``oracle.input_json``), the oracle's name,
    the oracle code and the Spark version that ran the query."""
    import pyspark

    code = [part for name in _ORACLE_CODE for part in (name, (_REPO / name).read_bytes())]
    return digest([input_json, oracle, pyspark.__version__, *code], length=32)


def entry_path(key: str) -> Path:
    return cache_dir() / "oracle" / f"{key}.pickle"


def load(path: Path) -> dict[Any, Any] | None:
    """The kept answer, or None: not kept, or not readable (then removed)."""
    try:
        data = pickle.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except Exception:  # a torn or foreign file: computed again, then replaced
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    return data if isinstance(data, dict) else None


def keep(path: Path, expected: dict[Any, Any]) -> None:
    """Keep an answer; a cache that cannot be written only costs the next run the query."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, pickle.dumps(expected, protocol=pickle.HIGHEST_PROTOCOL))
