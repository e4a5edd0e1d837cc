"""The house's shape (STYLE.md, "The house"): no import cycle, no module over 800 lines, a flat
core of at most 18 modules that never imports a capability or the projections.

The imports are read from the source (every ``import`` and ``from ... import`` anywhere in a
module: at its top, inside functions, under ``TYPE_CHECKING``), not from a running interpreter,
so an import that only runs on some path counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Where each package's source lives (projections/ installs as braidlog.projections).
SOURCES = {"braidlog": ROOT / "braidlog", "braidlog.projections": ROOT / "projections"}
MAX_LINES = 800
MAX_FLAT = 18
#: The capabilities (STYLE.md): subpackages the core must not import.
CAPABILITIES = ("recall", "proofs", "replication", "mcp", "integrations", "bench", "cli",
                "projections")
#: Core modules allowed to reach one capability, and why.
CORE_EXCEPTIONS = {
    # the package's entry point: `python -m braidlog` is the command line
    ("braidlog.__main__", "braidlog.cli"),
    # the public API re-exports recall's names, loaded on first use (numpy, hnswlib)
    ("braidlog", "braidlog.recall"),
    # Braid.recall and View.recall are the facade's door to recall, imported on first use; close
    # saves a recall index only when recall was loaded
    ("braidlog.braid", "braidlog.recall"),
}
#: Modules over MAX_LINES being split by their owner now; remove the entry with the split.
BEING_SPLIT: set[str] = set()


def modules() -> dict[str, Path]:
    """Every module of braidlog and its projections, by dotted name."""
    found = {}
    for package, base in SOURCES.items():
        for path in sorted(base.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that module ``name`` imports, anywhere in its source."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")[: None if is_package else -1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # ``from pkg import sub`` imports the submodule; ``from mod import name`` the module
            targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in known else source
                       for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # a name inside a module: the module
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def test_the_graph_is_read_from_the_source(graph):
    """The reader finds imports of every form (else the checks below would pass vacuously)."""
    assert "braidlog.lmdb.log" in graph["braidlog.braid"]  # from .lmdb.log import LmdbLog
    assert "braidlog.lmdb.check" in graph["braidlog.lmdb.log"]  # inside a method
    assert "braidlog" in graph["braidlog.projections.knots"]  # from braidlog import ...
    assert "braidlog.recall" in graph["braidlog.braid"]  # a function-level import
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle(graph):
    found = cycles(graph)
    shown = ["; ".join(f"{a} -> {', '.join(sorted(graph[a] & set(c)))}" for a in c) for c in found]
    assert not found, "import cycles:\n" + "\n".join(shown)


def test_the_core_imports_no_capability_and_no_projections(graph):
    core = [n for n, p in modules().items() if n == "braidlog" or p.parent == SOURCES["braidlog"]]
    bad = sorted((n, d) for n in core for d in graph[n]
                 if d.split(".")[1:2] and d.split(".")[1] in CAPABILITIES
                 and (n, ".".join(d.split(".")[:2])) not in CORE_EXCEPTIONS)
    assert not bad, f"core modules importing a capability: {bad}"


def test_no_module_over_800_lines():
    long = {str(p.relative_to(ROOT)): n for p in modules().values()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not {k: v for k, v in long.items() if k not in BEING_SPLIT}, long


def test_the_core_stays_small():
    flat = sorted(p.name for p in SOURCES["braidlog"].glob("*.py"))
    assert len(flat) <= MAX_FLAT, f"{len(flat)} modules flat in braidlog/: {flat}"
