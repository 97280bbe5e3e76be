"""ftctl/run/capture.py: the extension compare and the Spark figures read runs back with."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from chaos.plan import Schedule
from ftctl.run.capture import Capture
from ftctl.run.chaos import ChaosExtension


class _Chaos(ChaosExtension):
    """Records the hooks it is given; host_done sets the clock shift as the real one does."""

    def __init__(self) -> None:
        super().__init__(Schedule([], "none", 1, ""), 1.0)
        self.calls: list[str] = []

    def attach(self, ctx: Any) -> None:
        self.calls.append("attach")

    def host_done(self, ctx: Any, result: Any) -> None:
        self.calls.append("host_done")
        self.shift = 2.5

    def summarize(self, ctx: Any, result: Any, summary: dict[str, Any]) -> None:
        self.calls.append("summarize")
        summary["recovery"] = ["from chaos"]

    def print(self, summary: dict[str, Any]) -> None:
        self.calls.append("print")

    def close(self) -> None:
        self.calls.append("close")


class _Seen(Capture):
    def keep(self, ctx: Any, result: Any, summary: dict[str, Any]) -> None:
        self.seen = (self.shift, dict(summary), result)


def test_every_hook_reaches_the_chaos_extension_and_keep_sees_its_summary() -> None:
    chaos = _Chaos()
    ext = _Seen(chaos)
    ctx, result, summary = SimpleNamespace(), SimpleNamespace(name="r"), {"passed": True}
    ext.attach(ctx)  # type: ignore[arg-type]
    ext.host_done(ctx, result)  # type: ignore[arg-type]
    ext.summarize(ctx, result, summary)  # type: ignore[arg-type]
    ext.print(summary)
    ext.close()
    assert chaos.calls == ["attach", "host_done", "summarize", "print", "close"]
    assert ext.result is result
    # keep runs after the chaos extension: its shift is set and its summary part is there
    assert ext.seen == (2.5, {"passed": True, "recovery": ["from chaos"]}, result)


def test_without_a_schedule_it_keeps_the_result_and_the_shift_is_zero() -> None:
    ext = _Seen()
    result = SimpleNamespace(name="r")
    ext.attach(SimpleNamespace())  # type: ignore[arg-type]
    ext.host_done(SimpleNamespace(), result)  # type: ignore[arg-type]
    ext.summarize(SimpleNamespace(), result, {})  # type: ignore[arg-type]
    ext.close()
    assert ext.result is result and ext.seen == (0.0, {}, result)
