"""Protocols receive the core's output; they never set its fields or reach into privates.

Every module under protocols/ is parsed. A protocol changes an ``InstanceCore`` only
through its public methods (``deliver``, ``seek``, ``take_output``, ...): an assignment
to a core's attribute, to an item of one (``core.out_seq[ch] = ...``), a mutating call
on one (``core.finished.add(...)``), a ``_private`` attribute of a core or of another
runtime object, or a private name imported from ftctl fails here, naming the file and
line. A core is what the names ``core`` and ``cores[...]`` (``self.core``,
``self.cores[slot]``, ``unit.core``) and local aliases of them hold; a runtime object is
one reached from a core, from a name imported from ftctl, or from a parameter or variable
annotated with one (``batch: Batch``). A protocol's own classes may share privates.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTATORS = frozenset({"append", "extend", "insert", "pop", "popleft", "appendleft", "clear",
                      "update", "add", "discard", "remove", "setdefault", "popitem", "sort",
                      "reverse"})
# (module, core attribute) still set directly; each entry must still occur (a stale one
# fails), so the list only shrinks. replica-ring resumes an at-most-once source at its
# stored offset and routes a tuple's round-robin output by its id (X11).
KNOWN = frozenset({("protocols.replica_ring.logic", "offset"),
                   ("protocols.replica_ring.logic", "rr")})


def _is_cores(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "cores") or (
        isinstance(node, ast.Attribute) and node.attr == "cores")


class _Scope:
    def __init__(self) -> None:
        self.cores: set[str] = set()  # local names bound to a core
        self.owned: dict[str, str] = {}  # local names bound to a core's attribute -> it
        self.runtime: set[str] = set()  # parameters and variables of a runtime type


class Checker(ast.NodeVisitor):
    def __init__(self, module: str, runtime_names: set[str]):
        self.module = module
        self.runtime_names = runtime_names  # what the module imports from ftctl
        self.scopes = [_Scope()]
        self.found: list[tuple[int, str, str]] = []  # (line, core attribute or "", message)

    # ------------------------------------------------------------ what is a core

    def is_core(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id == "core" or node.id in self.scopes[-1].cores
        if isinstance(node, ast.Attribute):
            return node.attr == "core"
        if isinstance(node, ast.Subscript):
            return _is_cores(node.value)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            return node.func.attr == "get" and _is_cores(node.func.value)
        return False

    def core_field(self, node: ast.expr) -> str | None:
        """The core attribute ``node`` is, or is an alias of; None if it is neither."""
        if isinstance(node, ast.Attribute) and self.is_core(node.value):
            return node.attr
        if isinstance(node, ast.Name):
            return self.scopes[-1].owned.get(node.id)
        return None

    def is_runtime(self, node: ast.expr) -> bool:
        """``node`` is, or is reached from, a core or another runtime object."""
        while True:
            if self.is_core(node) or (isinstance(node, ast.Name) and (
                    node.id in self.runtime_names or node.id in self.scopes[-1].runtime)):
                return True
            if isinstance(node, ast.Attribute | ast.Subscript):
                node = node.value
            elif isinstance(node, ast.Call):
                node = node.func
            else:
                return False

    def typed_runtime(self, annotation: ast.expr | None) -> bool:
        return annotation is not None and any(
            isinstance(n, ast.Name) and n.id in self.runtime_names
            for n in ast.walk(annotation))

    def report(self, node: ast.AST, attr: str, what: str) -> None:
        self.found.append((getattr(node, "lineno", 0), attr, what))

    # ------------------------------------------------------------ scopes and aliases

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        scope = _Scope()
        a = node.args
        scope.runtime = {arg.arg for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]
                         if self.typed_runtime(arg.annotation)}
        self.scopes.append(scope)
        self.generic_visit(node)
        self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def bind(self, target: ast.expr, value: ast.expr) -> None:
        if not isinstance(target, ast.Name):
            return
        scope = self.scopes[-1]
        scope.cores.discard(target.id)
        scope.owned.pop(target.id, None)
        if self.is_core(value):
            scope.cores.add(target.id)
        elif (attr := self.core_field(value)) is not None:
            scope.owned[target.id] = attr

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        it = node.iter  # for c in self.cores.values(): c is a core
        if (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
                and it.func.attr == "values" and _is_cores(it.func.value)
                and isinstance(node.target, ast.Name)):
            self.scopes[-1].cores.add(node.target.id)
        self.generic_visit(node)

    # ------------------------------------------------------------ writes

    def check_target(self, target: ast.expr) -> None:
        if isinstance(target, ast.Tuple | ast.List):
            for t in target.elts:
                self.check_target(t)
        elif isinstance(target, ast.Starred):
            self.check_target(target.value)
        elif isinstance(target, ast.Attribute):
            if self.is_core(target.value):
                self.report(target, target.attr, f"assigns core.{target.attr}")
            elif (attr := self.core_field(target.value)) is not None:
                self.report(target, attr, f"assigns into core.{attr}")
        elif (isinstance(target, ast.Subscript)
              and (attr := self.core_field(target.value)) is not None):
            self.report(target, attr, f"assigns an item of core.{attr}")

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self.check_target(t)
        self.generic_visit(node)
        if len(node.targets) == 1:
            self.bind(node.targets[0], node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.check_target(node.target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.check_target(node.target)
        self.generic_visit(node)
        if isinstance(node.target, ast.Name) and self.typed_runtime(node.annotation):
            self.scopes[-1].runtime.add(node.target.id)
        if node.value is not None:
            self.bind(node.target, node.value)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self.check_target(t)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        if (isinstance(f, ast.Attribute) and f.attr in MUTATORS
                and (attr := self.core_field(f.value)) is not None):
            self.report(node, attr, f"changes core.{attr} with .{f.attr}()")
        if isinstance(f, ast.Name) and f.id in ("setattr", "delattr", "getattr") and node.args:
            name = node.args[1] if len(node.args) > 1 else None
            private = (isinstance(name, ast.Constant) and isinstance(name.value, str)
                       and _private(name.value))
            if (f.id != "getattr" and self.is_core(node.args[0])) or (
                    private and self.is_runtime(node.args[0])):
                self.report(node, "", f"{f.id}() on a core or a private attribute")
        self.generic_visit(node)

    # ------------------------------------------------------------ privates

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if _private(node.attr) and self.is_runtime(node.value):
            self.report(node, "", f"uses {node.attr}, private to the runtime")
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if (node.module or "").split(".")[0] != "protocols" and node.level == 0:
            for alias in node.names:
                if _private(alias.name):
                    self.report(node, "", f"imports {alias.name}, private to {node.module}")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _runtime_names(tree: ast.Module) -> set[str]:
    """What this module imports from ftctl (classes, functions, modules)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and (
                node.module or "").split(".")[0] == "ftctl":
            names |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names
                      if a.name.split(".")[0] == "ftctl"}
    return names


def check(module: str, source: str) -> Iterator[tuple[int, str, str]]:
    """(line, core attribute, what) for each way ``source`` reaches into a core."""
    tree = ast.parse(source)
    checker = Checker(module, _runtime_names(tree))
    checker.visit(tree)
    yield from sorted(checker.found)


def repo_findings() -> list[tuple[str, int, str, str]]:
    found = []
    for path in sorted((ROOT / "protocols").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        found += [(module, line, attr, what)
                  for line, attr, what in check(module, path.read_text())]
    return found


def test_protocols_leave_the_core_to_its_methods() -> None:
    found = repo_findings()
    assert len({f[0] for f in found} | {m for m, _ in KNOWN}) >= 1
    bad = [f"{m.replace('.', '/')}.py:{line}: {what}" for m, line, attr, what in found
           if (m, attr) not in KNOWN]
    assert bad == []
    stale = KNOWN - {(m, attr) for m, _, attr, _ in found}
    assert not stale, f"no longer set directly, remove from KNOWN: {sorted(stale)}"


PLANTED = {  # each line reaches into a core the way protocols once did
    "core.hold_output = core.is_sink": "assigns core.hold_output",
    "self.core.pending_output = []": "assigns core.pending_output",
    "out, self.core.pending_output = self.core.pending_output, []":
        "assigns core.pending_output",
    "self.core._output(self.core._advance_watermark(wm, []))":
        "uses _output, private to the runtime",
    "parts = core._hash_split(recs, chans)": "uses _hash_split, private to the runtime",
    "return self.core.op._state": "uses _state, private to the runtime",
    "return InstanceCore._output(core, [])": "uses _output, private to the runtime",
    "def g(b: Batch) -> None:\n    b._seq = 1": "uses _seq, private to the runtime",
    "self.cores[ev.slot].offset = ev.restored": "assigns core.offset",
    "core.in_wm[ch] = wm": "assigns an item of core.in_wm",
    "seqs = self.core.out_seq\nseqs[ch] += 1": "assigns an item of core.out_seq",
    "core.finished.add(ch)": "changes core.finished with .add()",
    "for c in self.cores.values():\n    c.rr = []": "assigns core.rr",
    "setattr(self.core, 'offset', 0)": "setattr() on a core or a private attribute",
    "from ftctl.runtime.instance import _Hidden":
        "imports _Hidden, private to ftctl.runtime.instance",
}


def test_each_way_into_the_core_is_caught() -> None:
    for snippet, what in PLANTED.items():
        source = ("from ftctl.runtime.instance import InstanceCore\n"
                  "from ftctl.runtime.messages import Batch\n"
                  "def f(self, core, ev, ch, wm, recs, chans):\n") + "".join(
            f"    {line}\n" for line in snippet.splitlines())
        found = [w for _, _, w in check("protocols.x", source)]
        assert what in found, (snippet, found)
        assert all(line > 3 for line, _, _ in check("protocols.x", source))


def test_what_protocols_may_do_is_not_caught() -> None:
    source = """
from ftctl.runtime.messages import Batch
from protocols.falkirk.coordinator import FalkirkCoordinator
class Mine:
    def _helper(self): return 1
    def merge(self, other: Mine, batch: Batch) -> None:
        self._by = other._by
        self.seq = batch.seq
    def f(self, core, ev):
        core.deliver(ev.channel, ev.batch)
        out = self.core.take_output()
        self.held = out.records
        self.cores[ev.slot].seek(self.core.offset + 1)
        n = len(core.out_seq) + self._helper() + super()._x() + Mine._helper(self)
        FalkirkCoordinator._gc_bound(self, 1)
        self.out += [a for a in out.sends]
        self.records = []
        self.records.append(core.offset)
        return getattr(self.core.op, "stateful", False)
"""
    assert list(check("protocols.x", source)) == []
