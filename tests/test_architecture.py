"""The house's shape (STYLE.md, "The house"; docs/architecture.md): no import cycle, no module
over 800 lines, a flat core of at most 18 modules that never imports a capability or the
projections, and the storage port by role (each adapter implements its ports, the ``lmdb``
library is imported under braidlog/lmdb/ alone, the LMDB-only operations use the log through its
seam, the store behind a facade is found by ``store_of`` alone).

The imports are read from the source (every ``import`` and ``from ... import`` anywhere in a
module: at its top, inside functions, under ``TYPE_CHECKING``), not from a running interpreter,
so an import that only runs on some path counts too.
"""

from __future__ import annotations

import ast
import functools
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


def core_modules() -> list[str]:
    """The core: the package, its flat modules and the storage port (braidlog/store/)."""
    base = SOURCES["braidlog"]
    return [n for n, p in modules().items()
            if n == "braidlog" or p.parent in (base, base / "store")]


def test_the_core_imports_no_capability_and_no_projections(graph):
    core = core_modules()
    assert "braidlog.store.ports" in core and "braidlog.braid" in core
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


# -- the storage port, by role ---------------------------------------------------------------------

def test_the_store_is_a_package_of_ports_rules_and_the_reference():
    base = SOURCES["braidlog"]
    assert not (base / "store.py").exists()
    assert {p.name for p in (base / "store").glob("*.py")} >= {"__init__.py", "ports.py", "rules.py",
                                                                "memory.py"}


def test_each_adapter_implements_its_ports():
    """LmdbLog names every role and capability as a base, MemoryLog every one but OnDisk; a
    SyncLog is what the store it wraps is; the views are readers only."""
    from braidlog import LmdbLog, MemoryLog
    from braidlog.braid import BatchView, ReadView
    from braidlog.replication.sync import OnDiskSyncLog, SyncLog
    from braidlog.store import CAPABILITIES, FullStore, LogReader, LogStore, OnDisk

    assert OnDisk in CAPABILITIES and len(CAPABILITIES) >= 7
    for port in (LogReader, LogStore, *CAPABILITIES):
        assert port in LmdbLog.__mro__, port
        assert port in OnDiskSyncLog.__mro__, port
        assert (port in MemoryLog.__mro__) == (port is not OnDisk), port
        assert (port in SyncLog.__mro__) == (port is not OnDisk), port
    assert FullStore in MemoryLog.__mro__ and FullStore in LmdbLog.__mro__
    assert "__getattr__" not in vars(SyncLog)  # every role explicit, nothing forwarded blindly
    assert LogReader in ReadView.__mro__ and LogStore not in ReadView.__mro__
    reader = {n for n, v in vars(LogReader).items() if callable(v) and not n.startswith("_")}
    assert reader <= set(dir(BatchView)) and not {"append", "commit"} & set(dir(BatchView))
    # BatchView answers through the ReadView it holds, not through ReadView's methods borrowed
    assert all(vars(BatchView).get(n) is not vars(ReadView).get(n) for n in reader)


@functools.cache
def _sources() -> dict[str, ast.Module]:
    """Every module's syntax tree, parsed once for the tests below (which only read them)."""
    return {name: ast.parse(path.read_text(encoding="utf-8"), str(path))
            for name, path in modules().items()}


def test_only_braidlog_lmdb_imports_the_lmdb_library():
    """The core and every other capability reach LMDB through braidlog.lmdb (the bench is the one
    other importer: its raw LMDB peer measures the library itself, its machine facts name
    liblmdb's version)."""
    found = set()
    for name, tree in _sources().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "lmdb" for a in node.names) \
                    or isinstance(node, ast.ImportFrom) and not node.level \
                    and (node.module or "").split(".")[0] == "lmdb":
                found.add(name)
    assert found, "the reader found no import of lmdb at all"
    assert {n for n in found if not n.startswith("braidlog.lmdb.")} <= {"braidlog.bench.peers",
                                                                         "braidlog.bench.machine"}, found


def test_the_store_behind_a_facade_is_found_by_store_of_alone():
    """No ``getattr(x, "log", x)``: ``store_of`` (store/ports.py) is the one way."""
    found = []
    for name, tree in _sources().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id == "getattr" and len(node.args) == 3 \
                    and isinstance(node.args[1], ast.Constant) and node.args[1].value == "log":
                found.append(f"{name}:{node.lineno}")
    assert not found, found


def test_the_lmdb_only_operations_use_the_log_through_its_seam():
    """lmdb/check.py, erase.py and backup.py reach no private member of a log: what they use is
    named in ``LogAccess`` (lmdb/access.py), which ``LmdbLog._access()`` hands them."""
    bad = []
    for name in ("braidlog.lmdb.check", "braidlog.lmdb.erase", "braidlog.lmdb.backup"):
        for node in ast.walk(_sources()[name]):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                    and not node.attr.startswith("__"):
                owner = node.value.id if isinstance(node.value, ast.Name) else "?"
                if (owner, node.attr) != ("self", "_access"):
                    bad.append(f"{name}:{node.lineno} {owner}.{node.attr}")
    assert not bad, bad


def test_the_architecture_page_shows_every_port():
    """docs/architecture.md's table of ports names each role and capability of store/ports.py."""
    from braidlog.store import CAPABILITIES, LogReader, LogStore

    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for port in (LogReader, LogStore, *CAPABILITIES):
        assert f"| `{port.__name__}" in page, port.__name__


def _calls(tree: ast.Module) -> set[str]:
    """The dotted names a module calls (``os.fsync``, ``committed_form``, ``p.add_argument``)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f, parts = node.func, []
            while isinstance(f, ast.Attribute):
                parts.append(f.attr)
                f = f.value
            if isinstance(f, ast.Name):
                out.add(".".join([f.id, *reversed(parts)]))
    return out


def test_each_rule_is_written_once():
    """A record's committed form is chosen (erased or not) in store/rules.py alone
    (``record_entry``); files and directories are fsynced in store/files.py alone (the bench
    measures the disk's fsync itself); ``--json`` is declared in cli/util.py alone."""
    sources = _sources()
    both = {n for n, t in sources.items() if {"committed_form", "erased_entry"} <= _calls(t)}
    assert both == {"braidlog.store.rules"}, both
    fsyncs = {n for n, t in sources.items() if "os.fsync" in _calls(t)}
    assert fsyncs <= {"braidlog.store.files", "braidlog.bench.machine"}, fsyncs
    json_flags = {n for n, t in sources.items() if n.startswith("braidlog.cli.")
                  for node in ast.walk(t) if isinstance(node, ast.Constant) and node.value == "--json"}
    assert json_flags == {"braidlog.cli.util"}, json_flags
