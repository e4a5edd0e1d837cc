"""The shell as a new user meets it: the installed ``braidlog`` console script, run as a
subprocess in an empty directory, with what the README and docs/cli.md tell them to type."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

BRAIDLOG = str(Path(sys.executable).with_name("braidlog"))


def sh(cwd: Path, *args: str, input: str | None = None, ok: bool = True) -> subprocess.CompletedProcess:
    """``braidlog ARGS`` in ``cwd``, its output as text; ``ok``: it must exit 0 (False: not 0)."""
    env = {k: v for k, v in os.environ.items() if k not in ("BRAIDLOG_APP", "BRAIDLOG_STORE", "PYTHONPATH")}
    r = subprocess.run([BRAIDLOG, *args], cwd=cwd, input=input, capture_output=True, text=True,
                       env=env, timeout=120)
    assert (r.returncode == 0) == ok, (args, r.returncode, r.stdout, r.stderr)
    return r


@pytest.fixture
def home(tmp_path):
    sh(tmp_path, "init")
    return tmp_path


def last(cwd: Path, store: str | None = None) -> dict:
    args = ["log", "--reverse", "--limit", "1", "--json"] + (["--store", store] if store else [])
    return json.loads(sh(cwd, *args).stdout)["delta"]


# ------------------------------------------------------------------ append with only what matters

def test_append_fills_in_ts_provenance_and_the_kind_s_confidence(home):
    before = datetime.now(timezone.utc)
    sh(home, "append", input='{"braid_id": "b", "kind": "message", "payload": {"text": "hello"}}')
    d = last(home)
    assert d["provenance"] == {"kind": "user"} and d["confidence"] == 0.7  # a message from a user
    ts = datetime.fromisoformat(d["ts"].replace("Z", "+00:00"))
    assert before <= ts <= datetime.now(timezone.utc)
    sh(home, "append", "--provenance", "assistant",
       input='{"braid_id": "b", "kind": "message", "payload": {"text": "hi"}}')
    assert (last(home)["provenance"], last(home)["confidence"]) == ({"kind": "assistant"}, 0.6)
    sh(home, "append", input='{"braid_id": "b", "kind": "tick", "payload": {}, "confidence": 0.2, '
                             '"ts": "2026-01-01T00:00:00Z", "provenance": {"kind": "tool"}}')
    d = last(home)
    assert (d["confidence"], d["ts"], d["provenance"]) == (0.2, "2026-01-01T00:00:00Z", {"kind": "tool"})
    r = sh(home, "append", "--provenance", "alien", input="{}", ok=False)
    assert "--provenance" in r.stderr and "alien" in r.stderr


def test_append_help_says_what_is_filled_in(home):
    text = " ".join(sh(home, "append", "--help").stdout.split())
    for said in ("ts with the time now (UTC)", '{"kind": "user"}', "--provenance KIND",
                 "a message from a user: 0.7"):
        assert said in text, said
