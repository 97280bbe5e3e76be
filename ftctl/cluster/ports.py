"""Choosing and checking TCP ports on 127.0.0.1 for the local cluster's daemons."""

from __future__ import annotations

import random
import socket
from pathlib import Path

from ftctl.cluster.errors import InfraError, PortInUseError

HOST = "127.0.0.1"
_EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_FALLBACK_LOW, _FALLBACK_HIGH = 20000, 32767


def is_port_free(port: int, host: str = HOST) -> bool:
    """Whether a listener could bind ``host:port`` now.

    SO_REUSEADDR is set because Java's server sockets set it too: a port held only by
    TIME_WAIT connections is usable by the JVM and must not be reported as taken.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def require_free_port(port: int, what: str, option: str | None = None) -> int:
    """Check a port the user asked for, with one line naming it if it is taken."""
    if not 1 <= port <= 65535:
        raise PortInUseError(f"{what} port {port} is not a valid TCP port (1-65535)")
    if not is_port_free(port):
        hint = f"; choose another with {option} or leave it out" if option else ""
        raise PortInUseError(f"{what} port {port} on {HOST} is already in use{hint}")
    return port


def _pick_range() -> tuple[int, int]:
    """A range below the kernel's ephemeral range.

    A port picked now is bound by a JVM seconds later; picking from the ephemeral range
    would let any outgoing connection (our own status polls included) take it meanwhile.
    """
    try:
        low_text, _ = _EPHEMERAL_RANGE_FILE.read_text().split()
        ephemeral_low = int(low_text)
    except (OSError, ValueError):
        return _FALLBACK_LOW, _FALLBACK_HIGH
    if ephemeral_low - 1 - 10000 < 1000:
        return _FALLBACK_LOW, _FALLBACK_HIGH
    return 10000, ephemeral_low - 1


class PortAllocator:
    """Hands out distinct free ports; remembers what it gave so two daemons never share one."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._given: set[int] = set()
        self._rng = rng or random.Random()
        self._low, self._high = _pick_range()

    def reserve(self, port: int) -> int:
        """Record a port chosen elsewhere (e.g. by the user) so it is not handed out again."""
        self._given.add(port)
        return port

    def pick(self, attempts: int = 200) -> int:
        for _ in range(attempts):
            port = self._rng.randint(self._low, self._high)
            if port not in self._given and is_port_free(port):
                self._given.add(port)
                return port
        raise InfraError(
            f"found no free port on {HOST} in {self._low}-{self._high} after {attempts} tries"
        )
