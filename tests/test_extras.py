"""Importing a capability without its extra names the extra to install: a MissingDependency (a
BraidlogError and an ImportError), never a bare ModuleNotFoundError. Each import runs in a child
interpreter where the extra's package cannot be imported (``sys.modules[name] = None``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

CASES = [("braidlog.integrations.langgraph", "langgraph", "langgraph"),
         ("braidlog.integrations.eventsourcing", "eventsourcing", "eventsourcing"),
         ("braidlog.mcp", "mcp", "mcp"),
         ("braidlog.recall", "hnswlib", "recall")]

CHILD = """
import sys
sys.modules[{blocked!r}] = None
import braidlog
try:
    import {module}
except braidlog.MissingDependency as e:
    assert isinstance(e, ImportError)
    print(e)
else:
    print("imported")
"""


@pytest.mark.parametrize("module, blocked, extra", CASES, ids=[c[0] for c in CASES])
def test_a_missing_extra_names_the_extra_to_install(module, blocked, extra):
    done = subprocess.run([sys.executable, "-c", CHILD.format(module=module, blocked=blocked)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f".[{extra}]'" in done.stdout and "Traceback" not in done.stderr
    if extra != "recall":  # recall's message predates the extras' names on PyPI
        assert f"pip install 'braidlog[{extra}]'" in done.stdout, done.stdout
