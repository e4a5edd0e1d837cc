"""verify and repair in a process that knows fewer kinds than the one that wrote the store."""

from __future__ import annotations

import subprocess
import sys

import pytest

import braidlog
from braidlog.cli import main


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    path = tmp_path_factory.mktemp("demo") / "braid.lmdb"
    assert main(["--store", str(path), "demo", "--quiet"]) == 0
    return path


def _bare(code: str, path) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh process that imports braidlog alone: no projection declares
    its kinds there, so the seed's core kinds stay open and other kinds are unknown."""
    return subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True)


def test_the_demo_verifies_from_the_command_line(demo, capsys):
    assert main(["--store", str(demo), "verify"]) == 0
    assert capsys.readouterr().out.startswith("ok: ")


def test_a_process_without_the_projections_verifies_without_false_alarms(demo):
    r = _bare("import sys, braidlog; log = braidlog.LmdbLog(sys.argv[1], readonly=True); "
              "print(log.verify().seq); print(sum(1 for _ in log.scan_refs("
              "next(iter(log.counts('braid'))))))", demo)
    assert r.returncode == 0, r.stderr


def test_repair_refuses_what_it_would_lose_and_changes_nothing(demo):
    r = _bare("import sys, braidlog\n"
              "log = braidlog.LmdbLog(sys.argv[1])\n"
              "before = log.counts('refs') if hasattr(log, 'counts') else None\n"
              "try:\n"
              "    log.repair_indexes()\n"
              "except braidlog.StorageError as e:\n"
              "    print('refused:', e)\n", demo)
    assert r.returncode == 0, r.stderr
    assert "refused:" in r.stdout and "would lose their entries" in r.stdout
    with braidlog.LmdbLog(demo, readonly=True) as log:
        log.verify()  # still whole


def test_repair_from_the_command_line_knows_every_installed_kind(demo):
    """In a fresh process, as a user runs it: nothing imported the projections before."""
    for argv in (["repair", "--indexes"], ["verify"]):
        r = subprocess.run([sys.executable, "-m", "braidlog", "--store", str(demo), *argv],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
