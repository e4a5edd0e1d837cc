"""The shell as a new user meets it: the installed ``braidlog`` console script, run as a
subprocess in an empty directory, with what the README and docs/cli.md tell them to type."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.support import ROOT

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
    before = datetime.now(UTC)
    sh(home, "append", input='{"braid_id": "b", "kind": "message", "payload": {"text": "hello"}}')
    d = last(home)
    assert d["provenance"] == {"kind": "user"} and d["confidence"] == 0.7  # a message from a user
    ts = datetime.fromisoformat(d["ts"].replace("Z", "+00:00"))
    assert before <= ts <= datetime.now(UTC)
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


# ---------------------------------------------------------------------- --app, as a new user writes it

APP = '''import braidlog, msgspec
class Todo(msgspec.Struct):
    n: int = 0
def count(s, d):
    s.n += 1
    return s
PROJECTIONS = [braidlog.Projection("todo", 1, Todo(), count, kinds={"message"})]
'''


def test_app_is_a_module_beside_the_user_or_a_file_path_and_joins_a_store_used_without_it(home):
    (home / "todo_app.py").write_text(APP)
    sh(home, "append", input='{"braid_id": "l", "kind": "message", "payload": {"text": "buy milk"}}')
    # the store was first used without the app: naming it now takes the app's projection in
    assert json.loads(sh(home, "--app", "todo_app", "state", "--json").stdout)["states"] == {"todo": {"n": 1}}
    assert json.loads(sh(home, "--app", "./todo_app.py", "state", "--json").stdout)["states"] == {"todo": {"n": 1}}
    assert "8 projection(s)" in sh(home, "--app", "./todo_app.py", "rebuild").stdout
    # recorded now: without --app the command names what it cannot find
    r = sh(home, "state")
    assert "the store is used with 'todo'" in r.stderr and "--app MODULE" in r.stderr
    for bad, said in (("nothere", "No module named 'nothere'"), ("./nothere.py", "no file")):
        r = sh(home, "--app", bad, "state", ok=False)
        assert said in r.stderr and "--app takes a module importable from the current directory" in r.stderr
        assert "Traceback" not in r.stderr and "installed" not in r.stderr


def test_state_shows_only_the_projections_that_hold_something(home):
    sh(home, "append", input='{"braid_id": "b", "kind": "message", "payload": {"text": "hi"}}')
    out = json.loads(sh(home, "state", "--json").stdout)
    assert out["states"] == {} and "no projection holds anything as of seq 1" in out["notes"]
    assert "note: no projection holds anything" in sh(home, "state").stdout


# ------------------------------------------------------------------------- time travel by date

def test_state_at_a_date_says_which_time_and_valid_at_reads_the_stamps(home):
    lines = "\n".join(json.dumps({"braid_id": "b", "kind": "memory_added", "ts": ts, "payload": {
        "id": mid, "type": "fact", "content": text, "confidence": 0.9, "workspace": "default",
        "timestamp": ts}}) for mid, ts, text in (
            ("m1", "2026-05-01T10:00:00Z", "one"), ("m2", "2026-05-01T12:00:00Z", "two"),
            ("m3", "2026-05-01T09:00:00Z", "backfilled")))
    sh(home, "append", input=lines)
    early = json.loads(sh(home, "state", "--at", "2026-05-01T08:00:00Z", "--json").stdout)
    assert early["seq"] == 0 and early["states"] == {}
    assert any("the longest prefix whose deltas are all stamped at or before it" in n for n in early["notes"])
    assert any("nothing was recorded by 2026-05-01T08:00:00+00:00" in n for n in early["notes"])
    at = json.loads(sh(home, "state", "--at", "2026-05-01T11:00:00Z", "--json").stdout)
    assert list(at["states"]["memories"]["memories"]) == ["m1"]
    assert any("1 delta(s) recorded later are stamped at or before" in n for n in at["notes"])
    valid = json.loads(sh(home, "state", "--valid-at", "2026-05-01T11:00:00Z", "--json").stdout)
    assert sorted(valid["states"]["memories"]["memories"]) == ["m1", "m3"] and valid["deltas"] == 2
    none = json.loads(sh(home, "state", "--valid-at", "2026-04-01T00:00:00Z", "--json").stdout)
    assert none["states"] == {} and any("no delta is stamped at or before" in n for n in none["notes"])
    r = sh(home, "state", "--valid-at", "2026-05-01T11:00:00Z", "--at", "2", ok=False)
    assert "--valid-at: cannot be combined with --at" in r.stderr
    r = sh(home, "state", "--valid-at", "yesterday", ok=False)
    assert "--valid-at: 'yesterday' is not a seq, a delta id or an ISO-8601 time" in r.stderr


# ---------------------------------------------------------------------- kinds declared from the shell

TASK = {"type": "object", "properties": {"task_id": {"type": "string"}, "title": {"type": "string"}},
        "required": ["task_id"]}


def test_kind_add_refers_and_text_make_a_shell_kind_first_class(tmp_path):
    (tmp_path / "task.json").write_text(json.dumps(TASK))
    r = sh(tmp_path, "kind", "add", "task", "--schema", "task.json", ok=False)  # no store yet
    assert "no store at braid.lmdb" in r.stderr and not (tmp_path / "braid.lmdb").exists()
    sh(tmp_path, "init")
    first = json.loads(sh(tmp_path, "kind", "add", "task", "--schema", "task.json", "--refers", "task_id",
                          "--text", "title", "--json").stdout)
    again = json.loads(sh(tmp_path, "kind", "add", "task", "--schema", "task.json", "--refers", "task_id",
                          "--text", "title", "--json").stdout)
    assert (first["version"], again["version"], again["seq"], again["changed"]) == (1, 1, first["seq"], False)
    sh(tmp_path, "append", input='{"braid_id": "b", "kind": "task", "payload": {"task_id": "t1", "title": "milk"}}')
    assert "_v" not in last(tmp_path)["payload"]
    assert "t1: 1 delta(s)" in sh(tmp_path, "history", "t1").stdout
    assert "how it got there: 1 delta(s)" in sh(tmp_path, "explain", "t1").stdout
    proof = json.loads(sh(tmp_path, "prove", "state", "decisions", "t1", "--at", "2", "--json").stdout)
    assert proof
    r = sh(tmp_path, "prove", "state", "decisions", "nobody", "--at", "2", ok=False)
    assert "entity: no delta up to seq 2 refers to 'nobody'" in r.stderr
    r = sh(tmp_path, "kind", "add", "task", "--schema", "task.json", "--refers", "owner", ok=False)
    assert "'owner' is not a property of the schema" in r.stderr


def test_kind_list_and_the_mcp_kinds_tool_list_the_same_set(tmp_path):
    pytest.importorskip("mcp")
    from tests.support.mcp import stdio

    (tmp_path / "task.json").write_text(json.dumps(TASK))
    sh(tmp_path, "init")
    sh(tmp_path, "kind", "add", "task", "--schema", "task.json")
    listed = {r["kind"] for r in json.loads(sh(tmp_path, "kind", "list", "--json").stdout)}
    with stdio(tmp_path / "braid.lmdb") as s:
        served = {k["kind"] for k in s.ok("kinds")["kinds"]}
    assert listed == served and "task" in listed and "decision_recorded" in listed


# --------------------------------------------------------------------------------------- smaller

def test_show_and_log_abridge_embedded_vectors_unless_asked(home):
    pytest.importorskip("hnswlib")
    sh(home, "append", "--embed", input='{"braid_id": "b", "kind": "message", "payload": {"text": "hello there"}}')
    # seq 1 is the space's embedder declaration, written with its first vector
    for args in (["show", "2", "--json"], ["log", "--kind", "message", "--json"]):
        d = json.loads(sh(home, *args).stdout)["delta"]
        assert d["vector"]["abridged"] is True and d["vector"]["dim"] > 0 and "data" not in d["vector"]
        whole = json.loads(sh(home, *args, "--vectors").stdout)["delta"]["vector"]
        assert len(whole["data"]) > 1000 and "abridged" not in whole
    assert '"abridged": true' in sh(home, "show", "2").stdout


def test_the_auditing_guide_runs_twice(tmp_path):
    import re

    text = (ROOT / "docs" / "auditing.md").read_text()
    (tmp_path / "guide.py").write_text("\n".join(re.findall(r"```python\n(.*?)```", text, re.S)))
    for _ in range(2):
        r = subprocess.run([sys.executable, "guide.py"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]


def test_the_docs_install_extras_from_the_clone():
    docs = ROOT / "docs"
    for page in docs.glob("*.md"):
        assert "pip install 'braidlog[" not in page.read_text(), page.name
    recall = (docs / "recall.md").read_text()
    assert "no compiler is needed" in recall and "hnswlib compiles from source: it needs" not in recall


def _false_subschemas(node, path="$"):
    """Where a boolean false stands as a schema (additionalProperties: false is a keyword value)."""
    if isinstance(node, list):
        for i, x in enumerate(node):
            yield from _false_subschemas(x, f"{path}[{i}]")
    elif isinstance(node, dict):
        for k, v in node.items():
            if v is False and k != "additionalProperties" and k not in ("default", "const", "examples") \
                    and not path.endswith((".properties", ".default")):
                yield f"{path}.{k}"
            elif v is False and path.endswith(".properties"):
                yield f"{path}.{k}"
            elif k not in ("default", "const", "examples", "enum"):
                yield from _false_subschemas(v, f"{path}.{k}")


def test_the_mcp_tools_schemas_hold_no_bare_false_schema(home):
    """The MCP Inspector's strict mode refuses a boolean false subschema (the memory tools had
    three: a Source span's "items": false)."""
    pytest.importorskip("mcp")
    from jsonschema import Draft202012Validator

    from tests.support.mcp import stdio

    with stdio(home / "braid.lmdb") as s:
        tools = s.tools
    assert {"add_memory", "list_memories"} <= set(tools)
    for name, tool in tools.items():
        for which, schema in (("input", tool.input_schema), ("output", tool.output_schema)):
            if schema is None:
                continue
            assert list(_false_subschemas(schema)) == [], (name, which)
            Draft202012Validator.check_schema(schema)
    span = json.dumps(tools["add_memory"].input_schema)
    assert '"prefixItems"' in span and '"maxItems": 2' in span


WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november "
         "oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()


def test_vector_recall_stops_at_the_relevance_floor(home):
    pytest.importorskip("hnswlib")
    lines = "\n".join(json.dumps({"braid_id": "b", "kind": "message",
                                  "payload": {"text": f"{a} {b} {c}"}})
                      for a, b, c in zip(WORDS, WORDS[3:] + WORDS[:3], WORDS[7:] + WORDS[:7], strict=False))
    sh(home, "append", "--embed", input=lines)
    everything = json.loads(sh(home, "recall", "postgres database", "--k", "26", "--min-score", "none",
                               "--json").stdout)["hits"]
    assert len(everything) == 26 and min(h["score"] for h in everything) < 0  # padding to k
    kept = json.loads(sh(home, "recall", "postgres database", "--k", "26", "--json").stdout)["hits"]
    assert kept == [h for h in everything if h["score"] >= 0] and len(kept) < 26
    r = sh(home, "recall", "x", "--min-score", "nan", ok=False)
    assert "--min-score" in r.stderr


@pytest.mark.slow
def test_a_new_user_in_a_fresh_venv_from_the_clone(tmp_path):
    """README's set-up (a fresh virtual environment, `pip install .` from the clone), then the
    shell steps of this file with that environment's `braidlog`."""
    root = ROOT
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(root)], capture_output=True,
                         text=True, timeout=900)
    assert pip.returncode == 0, pip.stderr[-2000:]
    exe, home = str(venv / "bin" / "braidlog"), tmp_path / "work"
    home.mkdir()

    def run(*args: str, input: str | None = None) -> str:
        r = subprocess.run([exe, *args], cwd=home, input=input, capture_output=True, text=True, timeout=300,
                           env={k: v for k, v in os.environ.items() if k not in ("BRAIDLOG_APP", "PYTHONPATH")})
        assert r.returncode == 0, (args, r.stderr)
        return r.stdout

    run("init")
    run("append", input='{"braid_id": "l", "kind": "message", "payload": {"text": "buy milk"}}')
    d = json.loads(run("show", "1", "--json"))["delta"]
    assert (d["provenance"], d["confidence"]) == ({"kind": "user"}, 0.7)
    (home / "todo_app.py").write_text(APP)
    run("--app", "./todo_app.py", "rebuild")
    assert json.loads(run("--app", "todo_app", "state", "--json"))["states"] == {"todo": {"n": 1}}
    (home / "task.json").write_text(json.dumps(TASK))
    run("kind", "add", "task", "--schema", "task.json", "--refers", "task_id")
    run("append", input='{"braid_id": "l", "kind": "task", "payload": {"task_id": "t1"}}')
    assert "t1: 1 delta(s)" in run("history", "t1")
    early = json.loads(run("--app", "todo_app", "state", "--at", "2000-01-01T00:00:00Z", "--json"))
    assert early["seq"] == 0 and any("nothing was recorded by" in n for n in early["notes"])
