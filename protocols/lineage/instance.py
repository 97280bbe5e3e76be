"""``LineageInstance``: the logged channel machinery, and a sink slot that always exists."""

from __future__ import annotations

from protocols.contract.events import Started
from protocols.contract.params import NoParams
from protocols.shared.logged import SLOT, LoggedInstance, Ready


class LineageInstance(LoggedInstance[NoParams]):
    # Lineage never trims a payload log before the end: a purge may need any batch, so
    # the logs hold everything sent and are kept encoded.
    encoded_log = True
    # A purge resends whole histories: 256 batches per event keeps each event's decoding
    # and queued output small (25,600 votes on the sharder topology). At 50M votes one
    # event took 6.1 s, 256 a few ms each, and less time in all (benchmarks/resend_chunk.py).
    resend_chunk = 256

    def start(self, ev: Started) -> None:
        core = self.core
        if core.is_sink:
            if ev.restored is not None:
                self.emitted = dict(ev.restored["emitted"])
            else:
                # A slot must exist before any failure so a replacement can always restore.
                self.persist(SLOT, self.sink_blob())
        if ev.reason == "restart":  # every restart is a purge's: the parents resend all
            self.report(Ready({ch: 1 for ch in core.inputs}))
