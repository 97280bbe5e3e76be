"""Reading the standalone master's JSON endpoint (``http://127.0.0.1:<ui>/json/``)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

# An empty ProxyHandler: an http_proxy in the user's environment must not route requests
# for 127.0.0.1 through a proxy (which would fail, or worse, ask another machine).
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))

MasterJson = dict[str, Any]


def master_json_url(ui_port: int, host: str = "127.0.0.1") -> str:
    return f"http://{host}:{ui_port}/json/"


def fetch_master_json(ui_port: int, timeout: float = 2.0) -> MasterJson | None:
    """The master's view of the cluster, or None while it is not answering (yet)."""
    try:
        with _OPENER.open(master_json_url(ui_port), timeout=timeout) as response:
            data = json.loads(response.read().decode("utf-8"))
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def workers_at(data: MasterJson, host: str, port: int) -> list[dict[str, Any]]:
    """Master entries for the worker listening on ``host:port``.

    A worker that died and was replaced on the same address appears twice (the master
    keeps DEAD workers for a while), so callers get all of them, best first: ALIVE
    before anything else, then the newest registration (ids embed a timestamp).
    """
    entries = [
        w
        for w in data.get("workers", [])
        if w.get("host") == host and int(w.get("port", -1)) == port
    ]
    entries.sort(key=lambda w: str(w.get("id", "")), reverse=True)
    entries.sort(key=lambda w: w.get("state") != "ALIVE")
    return entries


def worker_entry(data: MasterJson, host: str, port: int) -> dict[str, Any] | None:
    entries = workers_at(data, host, port)
    return entries[0] if entries else None
