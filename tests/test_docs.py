"""Every ```python block in README.md and docs/*.md runs (sqlite-utils and eventsourcing do this).

Each block runs on its own, in a fresh namespace, so a reader can copy any one of them; a block
whose first line is a comment beginning ``# continues`` (``# continues the example above``) says
that it builds on the blocks before it, and runs in their namespace. A page's blocks share one
fresh temporary directory and run in order. A block preceded by a ``<!-- no-run -->`` line (or
``<!-- no-run: why -->``) is skipped: only for code that cannot run here (a server that is not
running, a path on another machine); the page itself should say why.
"""

from __future__ import annotations

import contextlib
import re
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NO_RUN = re.compile(r"^<!--\s*no-run(:.*)?\s*-->\s*$")
CONTINUES = re.compile(r"^#\s*continues\b")


def python_blocks(text: str) -> list[tuple[int, str, bool]]:
    """(first line number, code, runs) for every ```python block of a Markdown text."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            start = i + 1
            j = start
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            prev = next((ln for ln in reversed(lines[:i]) if ln.strip()), "")
            blocks.append((start + 1, "\n".join(lines[start:j]) + "\n", not NO_RUN.match(prev.strip())))
            i = j + 1
        else:
            i += 1
    return blocks


def pages() -> list[Path]:
    found = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
    return [p for p in found if p.exists() and python_blocks(p.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_python_block_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BRAIDLOG_STORE", raising=False)
    namespaces = []
    namespace: dict = {}
    for line, code, runs in python_blocks(page.read_text(encoding="utf-8")):
        if not runs:
            continue
        if not CONTINUES.match(code.lstrip()):
            # a real module per chain of blocks, so that msgspec resolves its annotations
            module = types.ModuleType(f"docs_{page.stem.replace('-', '_')}_{line}")
            monkeypatch.setitem(sys.modules, module.__name__, module)
            namespace = module.__dict__
            namespaces.append(namespace)
        try:
            exec(compile(code, f"{page.relative_to(ROOT)}:{line}", "exec", dont_inherit=True), namespace)
        except Exception as e:
            pytest.fail(f"{page.relative_to(ROOT)}, the block at line {line} raised "
                        f"{type(e).__name__}: {e}")
    for value in [v for ns in namespaces for v in ns.values()]:  # stores a page left open
        if type(value).__module__.startswith("braidlog") and callable(getattr(value, "close", None)):
            with contextlib.suppress(Exception):  # closing twice is harmless
                value.close()


def test_a_block_continues_only_when_it_says_so(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text("```python\nx = 1\n```\n\n```python\n# continues the example above\n"
                    "assert x == 1\n```\n\n```python\nassert 'x' not in globals()\n```\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    test_every_python_block_runs(page, tmp_path, monkeypatch)


def test_the_extractor_finds_blocks_and_honours_no_run():
    text = ("intro\n\n```python\nx = 1\n```\n\n<!-- no-run: needs a server -->\n```python\n"
            "connect()\n```\n\n```console\n$ braidlog head\n```\n")
    assert python_blocks(text) == [(4, "x = 1\n", True), (9, "connect()\n", False)]
