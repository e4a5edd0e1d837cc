"""The shell's tables at ordinary widths: at 80 columns and through a pipe, every row keeps its
seq whole, its kind whole and the start of its payload; the braid id gives way first. Each
command runs as a user runs it: ``python -m braidlog`` in a subprocess, its output piped."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta

import pytest

import braidlog

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def shell(*args: str, columns: int | None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run([sys.executable, "-m", "braidlog", *args], capture_output=True, text=True,
                          env=env, input=stdin, timeout=120)


def rows(text: str) -> list[list[str]]:
    """The table's body rows (lines that start with a seq), split on runs of 2+ spaces."""
    return [re.split(r"\s{2,}", line.strip()) for line in text.splitlines() if re.match(r"^\s*\d+\s{2}", line)]


@pytest.fixture(scope="module")
def long_braids(tmp_path_factory):
    """A store whose braid ids are long, as an eventsourcing application's are."""
    path = tmp_path_factory.mktemp("tables") / "store"
    braids = [f"agentmemory_events:{uuid.UUID(int=n)}" for n in (1, 2)]
    with braidlog.open(path, projections=[]) as b:
        for n in range(14):
            b.append(braidlog.delta(braids[n % 2], "observation", {"text": f"event number {n} of the app"},
                                    ts=T0 + timedelta(seconds=n), provenance="tool"))
    return str(path), braids


@pytest.mark.parametrize("columns", [80, None], ids=["COLUMNS=80", "piped"])
def test_log_keeps_seq_kind_and_payload_with_long_braid_ids(long_braids, columns):
    path, braids = long_braids
    done = shell("--store", path, "log", columns=columns)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(map(len, lines)) <= (columns or 120)
    body = rows(done.stdout)
    assert [int(r[0]) for r in body] == list(range(1, 15))  # every seq whole, 10 and above too
    for n, r in enumerate(body):
        assert "observation" in r
        assert any(cell.startswith(f"event number {n}") for cell in r), r  # the payload's start
    if columns == 80:  # the braid id gave way, in its middle, both ends kept
        assert not any(braids[0] in line for line in lines)
        assert all(any(c.startswith("agen") and "…" in c for c in r) for r in body)


def test_the_demo_table_reads_at_80_columns(tmp_path):
    done = shell("--store", str(tmp_path / "demo"), "demo", columns=80)
    assert done.returncode == 0, done.stderr
    table = done.stdout[done.stdout.index("what the demo wrote"):]
    assert max(len(line) for line in table.splitlines()) <= 80
    header = next(line for line in table.splitlines() if line.lstrip().startswith("seq"))
    assert header.split()[:1] == ["seq"] and "kind" in header and "payload" in header
    body = rows(table)
    with braidlog.open(tmp_path / "demo", projections=[]) as b:
        head = b.head().seq
        kinds = {r.seq: r.delta.kind for r in b.log.scan()}
    assert [int(r[0]) for r in body] == list(range(int(body[0][0]), head + 1))
    for r in body:
        seq = int(r[0])
        assert kinds[seq] in r, r
        payload = r[-1]
        assert len(payload) >= 12 or not payload.endswith("…"), r  # the payload's start, readable
        assert re.fullmatch(r"\d\.\d\d", r[-2]) or r[-2] == kinds[seq], r  # confidences whole


def test_recall_table_reads_at_80_columns(long_braids):
    path, _ = long_braids
    done = shell("--store", path, "recall", "event number", "--mode", "keyword", columns=80)
    assert done.returncode == 0, done.stderr
    assert max(map(len, done.stdout.splitlines())) <= 80
    body = rows(done.stdout)
    assert body and all("observation" in r and any(c.startswith("event number") for c in r) for r in body)


def test_version():
    done = shell("--version", columns=None)
    assert (done.returncode, done.stdout) == (0, f"braidlog {braidlog.__version__}\n")


def test_a_payload_nested_1000_deep_is_refused_cleanly(tmp_path):
    line = '{"braid_id": "b1", "kind": "message", "payload": ' + '{"a": ' * 1000 + '"leaf"' + "}" * 1001
    store = str(tmp_path / "s")
    assert shell("--store", store, "init", columns=None).returncode == 0
    done = shell("--store", store, "append", columns=None, stdin=line + "\n")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "nests objects and arrays more than 16 levels deep" in done.stderr
    with braidlog.open(store, projections=[]) as b:
        assert b.head().seq == 0
