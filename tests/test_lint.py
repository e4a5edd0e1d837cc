"""The linter and the type checker run with the tests, so by CI: ruff over the repository and mypy over
the package as it installs (braidlog, and projections/ as braidlog.projections), both configured in
pyproject.toml. Any finding fails the suite, printed as the tool printed it."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.support import ROOT


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    # the interpreter running the tests, so the tools of its environment (the test extra) run
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)


def test_ruff_finds_nothing() -> None:
    r = _run("ruff", "check", ".", "--no-fix", "--output-format", "concise")
    assert r.returncode == 0, f"`ruff check .` found:\n{r.stdout}{r.stderr}"


def test_mypy_finds_nothing_in_every_module_of_the_package() -> None:
    r = _run("mypy")
    assert r.returncode == 0, f"`mypy` found:\n{r.stdout}{r.stderr}"
    # every module was checked: projections/ too, through typecheck/braidlog/projections
    modules = [p for base in ("braidlog", "projections") for p in (ROOT / base).rglob("*.py")
               if "__pycache__" not in p.parts]
    checked = re.search(r"no issues found in (\d+) source files", r.stdout)
    assert checked is not None and int(checked.group(1)) == len(modules), r.stdout
