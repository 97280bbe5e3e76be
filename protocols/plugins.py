"""Protocols from outside the package: installed plug-ins and ad hoc import paths.

Two ways in, both resolved only through ``protocols.registry``:

- an installed distribution declares ``[project.entry-points."ftctl.protocols"]``
  ``mine = "mine.spec:SPEC"``; ``-p mine`` runs it. A name a built-in already has, or two
  distributions declaring one name, is refused rather than shadowed: which one ran would
  otherwise depend on install order.
- ``-p package.module:SPEC`` imports the spec directly, from the current directory too (as
  ``python -m`` would), without installing anything. Its name stays the import path, so
  every process that sees the name (sim workers, Spark executors, ``reverify``) resolves it
  the same way.

Errors are ``PluginError``, an ``UnknownProtocol``: one line naming the entry point or
path, which every command turns into exit code 2.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
import sys
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from protocols.contract.spec import ProtocolSpec
from protocols.registry import UnknownProtocol

GROUP = "ftctl.protocols"
# ``name=module:ATTR;...``: plug-ins the driver shipped to an executor whose Python has
# no such distribution installed (``ftctl/spark/plugins.py`` sets it, with the code).
SHIPPED_ENV = "FTCTL_SHIPPED_PROTOCOLS"
_REF = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class PluginError(UnknownProtocol):
    """A plug-in that cannot be used; ``str`` is the one-line reason. An
    ``UnknownProtocol``, so every caller that turns one into a usage error handles it."""


@dataclass(frozen=True)
class Origin:
    """Where a protocol comes from, for ``ftctl list protocols`` and error messages."""

    kind: str  # "built-in", "entry point", "import path" or "shipped"
    dist: str | None = None
    version: str | None = None
    target: str | None = None  # "mine.spec:SPEC"

    def __str__(self) -> str:
        if self.kind == "entry point":
            return f"{self.dist} {self.version}"
        if self.kind == "import path":
            return f"import path {self.target}"
        if self.kind == "shipped":
            return f"shipped by the driver ({self.target})"
        return self.kind


BUILT_IN = Origin("built-in")


@dataclass
class Plugin:
    """An entry point of the ``ftctl.protocols`` group, loaded on first use."""

    name: str
    entry: EntryPoint
    origin: Origin
    spec: ProtocolSpec[Any] | None = None

    def load(self) -> ProtocolSpec[Any]:
        if self.spec is None:
            where = (f"entry point {self.name!r} of {self.origin} ({self.entry.value})"
                     if self.origin.kind == "entry point" else
                     f"{self.name!r} ({self.entry.value}, shipped by the driver)")
            try:
                loaded = self.entry.load()
            except Exception as exc:  # a plug-in's import may fail in any way
                raise PluginError(f"cannot load protocol {where}: "
                                  f"{type(exc).__name__}: {_first_line(exc)}") from None
            self.spec = _checked(loaded, self.name, where)
        return self.spec


def is_import_path(name: str) -> bool:
    """``package.module:SPEC`` rather than a registered name."""
    return ":" in name


def discover(built_in: set[str]) -> dict[str, Plugin]:
    """Every installed ``ftctl.protocols`` entry point by name, not loaded yet; refuses a
    name a built-in has, a name two distributions declare, and a malformed name."""
    found: dict[str, Plugin] = {}
    for ep in entry_points(group=GROUP):
        dist = ep.dist
        origin = Origin("entry point", dist.name if dist else "unknown distribution",
                        dist.version if dist else "?", ep.value)
        if not _NAME.match(ep.name):
            raise PluginError(f"protocol entry point {ep.name!r} of {origin}: a name is "
                              "letters, digits, '-', '_' and '.', with no '/' or ':'")
        if ep.name in built_in:
            raise PluginError(f"protocol {ep.name!r} of {origin} ({ep.value}) clashes with "
                              f"the built-in protocol {ep.name!r}; rename its entry point")
        other = found.get(ep.name)
        if other is not None and other.entry.value != ep.value:
            raise PluginError(f"protocol {ep.name!r} is declared by both {other.origin} and "
                              f"{origin}; uninstall one")
        found.setdefault(ep.name, Plugin(ep.name, ep, origin))
    for name, target in shipped().items():
        if name not in found and name not in built_in:
            found[name] = Plugin(name, EntryPoint(name, target, GROUP),
                                 Origin("shipped", target=target))
    return found


def shipped() -> dict[str, str]:
    """What ``SHIPPED_ENV`` names: plug-in name -> ``module:ATTR``."""
    pairs = (item.partition("=") for item in os.environ.get(SHIPPED_ENV, "").split(";"))
    return {name.strip(): target.strip() for name, sep, target in pairs if sep}


def import_spec(ref: str) -> ProtocolSpec[Any]:
    """The spec at ``package.module:ATTR``, named ``ref`` (raises ``PluginError``)."""
    if not _REF.match(ref):
        raise PluginError(f"protocol {ref!r}: an import path is package.module:ATTRIBUTE")
    module_name, _, attr = ref.partition(":")
    module = _import(module_name, ref)
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise PluginError(f"protocol {ref!r}: module {module_name!r} has no {attr!r}")
        obj = getattr(obj, part)
    return _checked(obj, ref, f"import path {ref!r}")


def _import(module_name: str, ref: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        ours = module_name == missing or module_name.startswith(missing + ".")
        cwd = os.getcwd()
        # As ``python -m`` would: a module in the working directory is found there, even
        # when ftctl runs from its installed script (whose sys.path lacks the directory).
        if missing and ours and cwd not in sys.path:
            sys.path.insert(0, cwd)
            try:
                return importlib.import_module(module_name)
            except ModuleNotFoundError:
                sys.path.remove(cwd)
        raise PluginError(f"protocol {ref!r}: cannot import {module_name!r} "
                          f"({_first_line(exc)}); is it installed or in the working "
                          "directory?") from None
    except Exception as exc:
        raise PluginError(f"protocol {ref!r}: importing {module_name!r} failed: "
                          f"{type(exc).__name__}: {_first_line(exc)}") from None


def _checked(obj: Any, name: str, where: str) -> ProtocolSpec[Any]:
    if not isinstance(obj, ProtocolSpec):
        raise PluginError(f"{where} is not a ProtocolSpec (got {type(obj).__name__})")
    # The registry name is what every process resolves again: the spec carries it.
    return obj if obj.name == name else dataclasses.replace(obj, name=name)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
