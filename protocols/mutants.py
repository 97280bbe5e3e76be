"""Every registered protocol's planted bugs, by qualified name (``checkpoint/commit-early``).

A protocol ships its mutants as a ``mutants`` tuple of ``Mutant`` on its registry entry, or
(for the built-ins registered before that field) as ``MUTANTS`` in
``protocols/<name>_mutants.py`` or ``protocols/<name>/mutants.py``; a plug-in's are on its
spec. Nothing here lists protocols: a newly registered one is found by its name, so the
conformance kit runs its mutants without any edit to this file.
"""

from __future__ import annotations

import importlib

from protocols.contract.spec import Mutant
from protocols.registry import BUILT_IN, PROTOCOLS, UnknownProtocol, registered, split_name


def _module_mutants(protocol: str) -> tuple[Mutant, ...]:
    snake = protocol.replace("-", "_")
    for module in (f"protocols.{snake}_mutants", f"protocols.{snake}.mutants"):
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is not None and module.startswith(exc.name):
                continue  # no such module: the protocol ships its mutants elsewhere or not at all
            raise
        return tuple(m for m in getattr(mod, "MUTANTS", ()) if isinstance(m, Mutant))
    return ()


def mutants_of(protocol: str) -> tuple[Mutant, ...]:
    """The planted bugs ``protocol`` ships (raises UnknownProtocol for an unknown protocol)."""
    spec = registered(protocol)
    own = tuple(getattr(spec, "mutants", ()) or ())
    return own if own or protocol not in BUILT_IN else _module_mutants(protocol)


def all_mutants() -> dict[str, tuple[Mutant, ...]]:
    """Every registered protocol's mutants, by protocol name."""
    return {name: mutants_of(name) for name in PROTOCOLS}


def get_mutant(qualified: str) -> tuple[str, Mutant]:
    """The protocol and the mutant named ``protocol/mutant`` (UnknownProtocol names what is
    unknown). ``protocols.registry.resolve`` plants it."""
    protocol, name = split_name(qualified)
    found = {m.name: m for m in mutants_of(protocol)}
    if name not in found:
        known = ", ".join(found) or "none"
        raise UnknownProtocol(f"unknown mutant {qualified!r} (known for {protocol}: {known})")
    return protocol, found[name]

