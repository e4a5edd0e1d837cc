"""The linter and the type checker run with the tests, so by CI: ruff over the repository and mypy over
the package as it installs (braidlog, and projections/ as braidlog.projections), both configured in
pyproject.toml. Any finding fails the suite, printed as the tool printed it. And every public function
of the package is annotated (mypy checks the bodies of unannotated ones, but does not ask for them)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

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
    assert checked is not None and int(checked.group(1)) == len(modules), (
        f"{r.stdout.strip()}, but braidlog and projections/ hold {len(modules)} modules: one in a folder "
        "without __init__.py, or projections/ not reached through typecheck/braidlog/projections")


def _unannotated(path: Path, module_public: bool) -> list[str]:
    """``path``'s public functions and methods (not nested in a function) missing an annotation."""
    found: list[str] = []

    def visit(node: ast.AST, public: bool, in_class: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, public and not child.name.startswith("_"), True)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = child.name
                if not public or (name.startswith("_") and not (name.startswith("__") and name.endswith("__"))):
                    continue
                a = child.args
                params = a.posonlyargs + a.args + a.kwonlyargs
                if in_class and params and params[0].arg in ("self", "cls"):
                    params = params[1:]
                missing = [p.arg for p in [*params, a.vararg, a.kwarg] if p is not None and p.annotation is None]
                if child.returns is None and name != "__init__":
                    missing.append("return")
                if missing:
                    found.append(f"{path.relative_to(ROOT)}:{child.lineno} {name}: {', '.join(missing)}")

    visit(ast.parse(path.read_text(encoding="utf-8")), module_public, False)
    return found


def test_every_public_function_is_annotated() -> None:
    # the package ships py.typed: its public functions say what they take and give
    found = []
    for base in ("braidlog", "projections"):
        for path in sorted((ROOT / base).rglob("*.py")):
            parts = path.relative_to(ROOT / base).parts
            public = not any(p.startswith("_") and p != "__init__.py" for p in parts)
            found += _unannotated(path, public)
    assert not found, "public functions missing annotations:\n" + "\n".join(found)
