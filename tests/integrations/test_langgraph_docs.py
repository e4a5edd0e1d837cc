"""docs/langgraph.md's example and the module its shell part runs (python -m
braidlog.integrations.langgraph.example) are the same code: every line of the page's first
block is a line of the module."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("langgraph.graph")

ROOT = Path(__file__).resolve().parents[2]


def test_the_docs_example_is_the_shipped_one():
    page = (ROOT / "docs" / "langgraph.md").read_text(encoding="utf-8")
    block = page.split("```python\n", 1)[1].split("```", 1)[0]
    module = (ROOT / "braidlog" / "integrations" / "langgraph" / "example.py").read_text(encoding="utf-8")
    lines = {ln.strip() for ln in module.splitlines()}
    code = [ln.strip() for ln in block.splitlines() if ln.strip()]
    assert len(code) > 30
    missing = [ln for ln in code if ln not in lines and "agent.lmdb" not in ln]
    assert not missing, missing
