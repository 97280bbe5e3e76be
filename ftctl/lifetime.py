"""A child process that dies with the ftctl process that started it.

The kernel sends a process a chosen signal when its parent dies (``PR_SET_PDEATHSIG``),
whatever killed the parent, SIGKILL included; strictly, when the parent's thread that
started it ends, so a parent must start such children from a thread that waits for them
(``subprocess.run``) or lives as long as it does. Only on Linux; elsewhere a child
outlives a parent killed outright, as before.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal

# Set by a parent in a child ftctl's environment: the parent's pid (``ftctl.cli.main``).
PARENT_ENV = "FTCTL_DIE_WITH"
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent: int, sig: int = signal.SIGTERM) -> None:
    """Have the kernel send this process ``sig`` when ``parent`` dies; if it is already
    gone (it died before this call took effect), send it now."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, sig)
    if os.getppid() != parent:
        os.kill(os.getpid(), sig)


def tie_from_environment() -> None:
    """Die with the parent named in ``PARENT_ENV``, if any; the variable is removed, so
    this process's own children are tied to it only if it says so again."""
    parent = os.environ.pop(PARENT_ENV, None)
    if parent is not None and parent.isdigit():
        die_with_parent(int(parent))


def tied_environment() -> dict[str, str]:
    """This process's environment for a child ftctl that is to die with it."""
    return {**os.environ, PARENT_ENV: str(os.getpid())}
