"""Every spec rule label the code cites is defined in docs/rules.md.

A citation is found in comments and string literals only (never in identifiers), in two
forms:

- anywhere, a label list after a cue word: ``spec R5``, ``Spec causal.md E4``,
  ``causal's rule N5``, ``rules R1-R6, M1``, ``flaw F6``, ``decision D4``, ``claim C5``,
  ``spec §4 (D1-D8)``, ``the spec's worked examples E1-E5, U3``;
- inside a protocol's own package (``protocols/causal/``...), a bare label too: ``(R11)``,
  ``T3:``, ``fix of F4``, since there it can only mean that protocol's spec.

A citation's spec is the one it names (``causal.md``, ``causal's``), else the one its file
is about (its package, a spec name in its path, a figure's paper number, else the first
``NAME.md`` the file names), else the one spec that defines the label. A failure names
file:line and what to add to docs/rules.md.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "rules.md"
SCANNED = ("ftctl", "protocols", "chaos", "tests", "benchmarks")
SPECS = ("causal", "falkirk", "replica-ring", "progressive", "nexmark", "contract-v2")
# ftctl/figures/fig_NNN_*: the paper a figure reproduces names the spec it cites.
PAPERS = {"000": "causal", "001": "falkirk", "002": "replica-ring", "003": "nexmark",
          "004": "progressive"}
# Packages whose bare labels are citations of their spec.
PACKAGES = {f"protocols/{s.replace('-', '_')}/": s
            for s in ("causal", "falkirk", "replica-ring", "progressive")}

# One or two capitals, one or two digits, an optional letter (S4b): not part of a longer
# word, a dotted name, an index (B[1]) or T*.
LABEL = r"(?<![\w.\[])[A-Z]{1,2}\d{1,2}[a-z]?(?![\w*'\[])"
DASH = r"[-\u2013]"  # a hyphen or an en dash
ITEM = rf"{LABEL}(?:\s*{DASH}\s*{LABEL})?"
LIST = rf"{ITEM}(?:(?:\s*[,/]\s*|\s+(?:and|or)\s+){ITEM})*"
NAMED = r"(?:``)?(?P<named>[a-z][a-z0-9-]*)(?:``)?(?:\.md|'s)\s+"
CUE = re.compile(
    rf"(?<![\w-])(?:{NAMED})?(?:[Ss]pec(?:'s)?(?:\s+rules?)?|[Rr]ules?|[Ff]laws?|[Dd]ecisions?"
    rf"|[Cc]laims?)(?:\s+worked\s+examples?)?\s+(?:(?P<md>[a-z][a-z0-9-]*)\.md\s+)?"
    rf"(?:§[\d.]+\s*)?\(?(?P<list>{LIST})")
BARE = re.compile(LABEL)
ANCHOR = re.compile(r'<a id="(?P<spec>[a-z0-9-]+)-(?P<label>[A-Z]{1,2}\d{1,2}[a-z]?)"></a>')


@dataclass(frozen=True)
class Citation:
    line: int
    label: str
    spec: str | None  # None: whichever spec defines the label, if only one does


def expand(item: str) -> list[str]:
    """``R1-R4`` -> R1, R2, R3, R4; anything else stays as written."""
    ends = [e.strip() for e in re.split(DASH, item)]
    if len(ends) == 2:
        a, b = (re.fullmatch(r"([A-Z]+)(\d+)", e) for e in ends)
        if a and b and a[1] == b[1] and int(a[2]) < int(b[2]):
            return [f"{a[1]}{n}" for n in range(int(a[2]), int(b[2]) + 1)]
    return ends


# Comments and string literals (an f-string's literal parts are tokens of their own).
TEXT_TOKENS = {tokenize.COMMENT, tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", -1)}


def texts(source: str) -> Iterator[tuple[int, str]]:
    """(first line, text) of every comment and string literal."""
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in TEXT_TOKENS:
            yield tok.start[0], tok.string


def file_spec(rel: str, source: str) -> str | None:
    for prefix, spec in PACKAGES.items():
        if rel.startswith(prefix):
            return spec
    name = Path(rel).name
    for spec in SPECS:
        if spec in name or spec.replace("-", "_") in name:
            return spec
    paper = re.search(r"fig_?(\d{3})", name)
    if paper and paper[1] in PAPERS:
        return PAPERS[paper[1]]
    named = re.search(rf"\b({'|'.join(SPECS)})\.md\b", source)
    return named[1] if named else None


def citations(rel: str, source: str) -> list[Citation]:
    """Every label ``source`` (the file at ``rel`` under the root) cites, with its spec."""
    default = file_spec(rel, source)
    bare = next((s for p, s in PACKAGES.items() if rel.startswith(p)), None)
    out: list[Citation] = []
    for first, text in texts(source):
        cued: list[range] = []  # the label lists read after a cue, not read again bare
        for m in CUE.finditer(text):
            named = next((n for n in (m["named"], m["md"]) if n in SPECS), None)
            line = first + text.count("\n", 0, m.start("list"))
            cued.append(range(m.start("list"), m.end("list")))
            for item in re.finditer(ITEM, m["list"]):
                out += [Citation(line, label, named or default) for label in expand(item[0])]
        if bare is None:
            continue
        for m in BARE.finditer(text):
            if not any(m.start() in span for span in cued):
                out.append(Citation(first + text.count("\n", 0, m.start()), m[0], bare))
    return out


def definitions(doc: str) -> set[tuple[str, str]]:
    return {(m["spec"], m["label"]) for m in ANCHOR.finditer(doc)}


def undefined(rel: str, source: str, defined: set[tuple[str, str]]) -> list[str]:
    """One message per citation with no definition (or no single spec to look it up in)."""
    problems = []
    for c in citations(rel, source):
        specs = [c.spec] if c.spec else sorted(s for s, lab in defined if lab == c.label)
        where = f"{rel}:{c.line}"
        if c.spec and (c.spec, c.label) not in defined:
            problems.append(f"{where}: {c.label} has no definition under {c.spec} in "
                            f"docs/rules.md (add <a id=\"{c.spec}-{c.label}\"></a>)")
        elif not specs:
            problems.append(f"{where}: {c.label} is defined for no spec in docs/rules.md")
        elif len(specs) > 1:
            problems.append(f"{where}: {c.label} is ambiguous ({', '.join(specs)}): cite it "
                            f"as `spec {specs[0]}.md {c.label}`")
    return problems


def sources() -> Iterator[tuple[str, str]]:
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            if path == Path(__file__).resolve():
                continue  # its examples of the pattern are not citations
            yield path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")


def test_every_cited_rule_label_is_defined_in_the_docs() -> None:
    defined = definitions(DOC.read_text(encoding="utf-8"))
    problems = [p for rel, src in sources() for p in undefined(rel, src, defined)]
    assert not problems, "\n".join(problems)


def test_each_definition_has_one_anchor() -> None:
    anchors = [(m["spec"], m["label"]) for m in ANCHOR.finditer(DOC.read_text(encoding="utf-8"))]
    assert len(anchors) == len(set(anchors)) and {s for s, _ in anchors} <= set(SPECS)


def test_the_scan_finds_the_citations_the_code_is_known_to_make() -> None:
    # One of each form, so a pattern that went blind would fail here, not pass silently.
    found = {(rel, c.spec, c.label) for rel, src in sources() for c in citations(rel, src)}
    assert {("protocols/falkirk/fixedpoint.py", "falkirk", "R5"),  # ``spec rule R5``
            ("protocols/falkirk/coordinator.py", "falkirk", "D8"),  # ``spec D8``
            ("protocols/causal/messages.py", "causal", "M3"),
            ("protocols/falkirk/recovery.py", "falkirk", "R11"),  # bare, in its package
            ("ftctl/kernel/piggyback.py", "causal", "N5"),  # ``causal's rule N5``
            ("protocols/shared/logged.py", "causal", "E4"),  # ``spec causal.md E4``
            ("ftctl/figures/fig_002_table2.py", "replica-ring", "C5"),  # a figure's paper
            ("tests/test_sink_identity.py", "causal", "R4"),  # the file's first NAME.md
            ("ftctl/metrics/queries.py", None, "D19"),  # one spec defines it
            } <= found
    assert len(found) > 100


SNIPPET = '''"""Recovery plans (spec R1-R3; ``causal``'s rules N5, E4)."""
X1 = compute_sha256(UTF8)  # a variable, not a citation; nor is B[1] or T* or v2.R7
# the paper's rule Q77 is new
'''


def test_a_new_undefined_citation_is_caught_and_named() -> None:
    cites = citations("ftctl/new.py", SNIPPET)
    assert [(c.line, c.spec, c.label) for c in cites] == [
        (1, None, "R1"), (1, None, "R2"), (1, None, "R3"), (1, "causal", "N5"),
        (1, "causal", "E4"), (3, None, "Q77")]
    defined = {("causal", "N5"), ("causal", "E4"), ("causal", "R1"), ("causal", "R2"),
               ("causal", "R3"), ("falkirk", "R3")}
    assert undefined("ftctl/new.py", SNIPPET, defined) == [
        "ftctl/new.py:1: R3 is ambiguous (causal, falkirk): cite it as `spec causal.md R3`",
        "ftctl/new.py:3: Q77 is defined for no spec in docs/rules.md"]


def test_a_bare_label_counts_only_inside_a_protocols_package() -> None:
    src = "def f():\n    return 1  # the taker asks again (T5)\n"
    assert citations("ftctl/sim/x.py", src) == []
    assert citations("protocols/replica_ring/x.py", src) == [Citation(2, "T5", "replica-ring")]
    # a list after a cue is read once, with the spec it names
    named = "# spec causal.md M1-M2 (R3)\n"
    assert citations("protocols/progressive/x.py", named) == [
        Citation(1, "M1", "causal"), Citation(1, "M2", "causal"), Citation(1, "R3", "progressive")]
    assert undefined("protocols/replica_ring/x.py", src, set()) == [
        'protocols/replica_ring/x.py:2: T5 has no definition under replica-ring in '
        'docs/rules.md (add <a id="replica-ring-T5"></a>)']


@pytest.mark.parametrize(("text", "labels"), [
    ("spec R7/R8", ["R7", "R8"]),
    ("spec §4 (D1-D3)", ["D1", "D2", "D3"]),
    ("the spec's worked examples E1-E2, U3", ["E1", "E2", "U3"]),
    ("spec U6-U7 and E6", ["U6", "U7", "E6"]),
    ("flaw F1", ["F1"]),
    ("spec F1\u2013F2", ["F1", "F2"]),  # an en dash
    ("spec §7", []),
    ("Nexmark Q5", []),
    ("rule of thumb: 3", []),
])
def test_the_cue_forms(text: str, labels: list[str]) -> None:
    assert [c.label for c in citations("ftctl/x.py", f"# {text}\n")] == labels
    assert [c.label for c in citations("ftctl/x.py", f'y = f"{{x}} {text}"\n')] == labels
