"""Every protocol ftctl knows, by name, and what a ``--protocol`` name runs.

An entry is a ``ProtocolSpec`` (contract v2, ``protocols/contract``). A built-in is
registered by adding its spec to ``BUILT_IN``: ``"falkirk": falkirk.SPEC``. Protocols from
other distributions come in through the ``ftctl.protocols`` entry-point group, and any
spec by its import path, ``package.module:SPEC`` (``protocols/plugins.py``). A name is a
registered protocol (``checkpoint``), an import path, or either followed by one of its
shipped mutants (``checkpoint/commit-early``, ``protocols/mutants.py``); ``resolve`` is the
one place that tells them apart, so every command accepts all of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any, NamedTuple

from protocols.causal.spec import SPEC as CAUSAL
from protocols.checkpoint.spec import SPEC as CHECKPOINT
from protocols.contract.spec import ProtocolSpec
from protocols.falkirk.spec import SPEC as FALKIRK
from protocols.lineage.spec import SPEC as LINEAGE
from protocols.none import SPEC as NONE
from protocols.progressive import spec as progressive
from protocols.replica_ring.spec import SPEC as REPLICA_RING

if TYPE_CHECKING:
    from protocols.plugins import Origin, Plugin

Protocol = ProtocolSpec[Any]

BUILT_IN: dict[str, Protocol] = {
    "none": NONE,
    "checkpoint": CHECKPOINT,
    "lineage": LINEAGE,
    "causal": CAUSAL,
    "falkirk": FALKIRK,
    "replica-ring": REPLICA_RING,
    "progressive": progressive.SPEC,
}


class UnknownProtocol(KeyError):
    """A protocol or mutant name nobody registered or ships; ``str`` is the one-line reason
    (a KeyError subclass, so callers that caught KeyError keep working)."""

    def __str__(self) -> str:
        return str(self.args[0])


class _Registry(MutableMapping[str, Protocol]):
    """The built-ins, then the installed plug-ins in entry-point order. Plug-ins are found
    on first use and each is imported when first looked up (iterating values imports them
    all), so a command pays for none of this until it names a protocol."""

    def __init__(self, built_in: dict[str, Protocol]):
        self.built_in = built_in
        self._plugins: dict[str, Plugin] | None = None
        self._imported: dict[str, Protocol] = {}  # import paths, once each

    def plugins(self) -> dict[str, Plugin]:
        if self._plugins is None:
            from protocols.plugins import discover

            self._plugins = discover(set(self.built_in))
        return self._plugins

    def rescan(self) -> None:
        """Forget what was discovered (after installing or removing a distribution)."""
        self._plugins = None
        self._imported.clear()

    def __getitem__(self, name: str) -> Protocol:
        plugins = self.plugins()  # first: a plug-in clashing with a built-in is refused
        if name in self.built_in:
            return self.built_in[name]
        if name in plugins:
            return plugins[name].load()
        from protocols.plugins import import_spec, is_import_path

        if is_import_path(name):
            if name not in self._imported:
                self._imported[name] = import_spec(name)
            return self._imported[name]
        raise KeyError(name)

    def __setitem__(self, name: str, spec: Protocol) -> None:
        # Registering in-process (tests, embedding programs) adds a built-in.
        self.built_in[name] = spec

    def __delitem__(self, name: str) -> None:
        del self.built_in[name]

    def __iter__(self) -> Iterator[str]:
        yield from self.built_in
        yield from self.plugins()

    def __len__(self) -> int:
        return len(self.built_in) + len(self.plugins())

    def __contains__(self, name: object) -> bool:
        return name in self.built_in or name in self.plugins()

    def used_outside(self) -> dict[str, str]:
        """The protocols from outside the package this process has loaded, by name: their
        ``module:ATTR`` (what another process, a Spark executor, must import)."""
        used = {name: p.entry.value for name, p in (self._plugins or {}).items()
                if p.spec is not None}
        return {**used, **{name: name for name in self._imported}}

    def origin(self, name: str) -> Origin:
        from protocols.plugins import BUILT_IN as BUILT_IN_ORIGIN
        from protocols.plugins import Origin, is_import_path

        if name in self.built_in:
            return BUILT_IN_ORIGIN
        plugins = self.plugins()
        if name in plugins:
            return plugins[name].origin
        if is_import_path(name):
            return Origin("import path", target=name)
        raise UnknownProtocol(f"unknown protocol {name!r}")


PROTOCOLS = _Registry(BUILT_IN)


class Resolved(NamedTuple):
    spec: Protocol
    # A mutant's variant params (``aligned-no-block`` lives in ``alignment=aligned``),
    # to be overlaid by the user's; empty for a registered protocol.
    params: dict[str, Any]


def split_name(name: str) -> tuple[str, str | None]:
    """``"checkpoint/commit-early"`` -> ``("checkpoint", "commit-early")``; no ``/``: no mutant."""
    protocol, sep, mutant = name.partition("/")
    return protocol, (mutant if sep else None)


def registered(name: str) -> Protocol:
    """The registry entry named exactly ``name``: a built-in, an installed plug-in, or an
    import path ``package.module:SPEC`` (a mutant name is not one)."""
    try:
        return PROTOCOLS[name]
    except UnknownProtocol:
        raise  # a plug-in that cannot be used: its own one-line reason
    except KeyError:
        raise UnknownProtocol(
            f"unknown protocol {name!r} (known: {', '.join(PROTOCOLS)})") from None


def origin(name: str) -> str:
    """Where protocol ``name`` comes from: ``built-in``, ``<distribution> <version>`` or
    ``import path <path>``."""
    return str(PROTOCOLS.origin(name))


def resolve(name: str) -> Resolved:
    """What ``name`` runs: a registered protocol, or ``protocol/mutant``, the protocol's entry
    with the mutant's classes planted and named ``name`` (raises ``UnknownProtocol``)."""
    protocol, mutant_name = split_name(name)
    if mutant_name is None:
        return Resolved(registered(name), {})
    from protocols.mutants import get_mutant  # imports this module: bound late

    _, mutant = get_mutant(name)
    base = registered(protocol)
    spec = dataclasses.replace(base, name=name, instance=mutant.instance or base.instance,
                               coordinator=mutant.coordinator or base.coordinator)
    return Resolved(spec, dict(mutant.params))


def get_protocol(name: str) -> Protocol:
    """The spec ``name`` runs (``resolve`` without the mutant's variant params)."""
    return resolve(name).spec
