"""What the repository itself holds: no build artifact or other large file is committed, and the
tests mirror the packages, each folder with its conftest.py, no test module importing another."""

from __future__ import annotations

import ast
import shutil
import subprocess

import pytest

from tests.support import ROOT

MAX_TRACKED_BYTES = 1 << 20


def tracked_files() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a clone of the repository (an sdist has no .git)")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return [name for name in out.stdout.decode().split("\0") if name]


def test_no_tracked_file_is_over_one_megabyte():
    large = {name: size for name in tracked_files()
             if (path := ROOT / name).is_file() and (size := path.stat().st_size) > MAX_TRACKED_BYTES}
    assert not large, f"files over 1 MB are committed (build artifacts go nowhere; data is made by the tests): {large}"


def test_build_artifacts_are_ignored():
    tracked = tracked_files()
    assert not [n for n in tracked if n.endswith(".whl") or n.startswith("dist/")]
    for artifact in ["braidlog-0.1.0-py3-none-any.whl", "dist/braidlog-0.1.0.tar.gz"]:
        probe = subprocess.run(["git", "check-ignore", "-q", artifact], cwd=ROOT)
        assert probe.returncode == 0, f"{artifact} is not ignored: *.whl and dist/ belong in .gitignore"


def test_each_test_folder_has_its_conftest():
    folders = [p for p in (ROOT / "tests").iterdir()
               if p.is_dir() and any(p.glob("test_*.py"))]
    assert folders, "tests/ has no package folders"
    assert [p.name for p in folders if not (p / "conftest.py").exists()] == []


def imported_modules(tree: ast.Module, package: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # a relative import, resolved against the module's package
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_no_test_module_imports_another_or_a_conftest():
    offenders = {}
    for path in (ROOT / "tests").rglob("*.py"):
        package = ".".join(path.relative_to(ROOT).parent.parts)
        bad = {name for name in imported_modules(ast.parse(path.read_text(encoding="utf-8")), package)
               if name.startswith("tests.") and name.rsplit(".", 1)[-1].startswith(("test_", "conftest"))}
        if bad:
            offenders[str(path.relative_to(ROOT))] = sorted(bad)
    assert offenders == {}, "shared helpers belong in tests/support"
