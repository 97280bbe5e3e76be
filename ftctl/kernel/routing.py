"""The routing table: which unit hosts each slot.

Every slot starts on its own unit (the unit is named by that slot). A takeover routes a
dead replica's slot to the unit that adopted it (``Route``); reinstatement routes it back.
Hosts resolve a destination slot through this table when a message is *sent* (data,
peer messages and controls alike): a message sent to a unit that dies on the way is lost
with it, as over a real connection, and the sender's retry goes to the new route.
"""

from __future__ import annotations


class Routing:
    """``slot -> unit``; only slots away from their own unit are stored, so an unrouted
    run (every protocol without takeover) costs one failed dict lookup per message."""

    __slots__ = ("moved",)

    def __init__(self) -> None:
        self.moved: dict[str, str] = {}

    def unit_of(self, slot: str) -> str:
        return self.moved.get(slot, slot)

    def set(self, slot: str, unit: str) -> bool:
        """Route ``slot`` to ``unit``; True when that changed anything."""
        if self.unit_of(slot) == unit:
            return False
        if unit == slot:
            del self.moved[slot]
        else:
            self.moved[slot] = unit
        return True

    def away(self, unit: str) -> list[str]:
        """Slots other than its own that ``unit`` currently hosts, sorted."""
        return sorted(s for s, u in self.moved.items() if u == unit)
