"""An application's kinds and projections from the shell: --app, BRAIDLOG_APP, entry points,
and the projections a store records that it is used with."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

import braidlog
from braidlog import LmdbLog
from braidlog.apps import discover, for_store
from braidlog.cli import main

APP = '''
import msgspec
import braidlog


class TaskAdded(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    task_id: str
    title: str


braidlog.declare("task_added", TaskAdded, owner="todo", refers=lambda p: [p.task_id])


def evolve(state, delta):
    p = braidlog.typed(delta)
    state[p.task_id] = p.title
    return state


PROJECTIONS = [braidlog.Projection("todo", 1, {}, evolve, kinds=frozenset({"task_added"}),
                                   state_type=dict[str, str])]
'''


@pytest.fixture
def app(tmp_path, monkeypatch):
    """A store written by a small todo application (not installed: named by module)."""
    name = f"todo_app_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(APP)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("BRAIDLOG_APP", raising=False)
    module = __import__(name)
    path = tmp_path / "todo.lmdb"
    with braidlog.open(path, projections=module.PROJECTIONS) as braid:
        braid.append(braidlog.delta("me", "task_added", {"task_id": "t1", "title": "write docs"}))
    return name, str(path)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_store_records_the_projections_it_is_used_with(app):
    _, path = app
    with LmdbLog(path) as log:
        assert log.projections_used() == ["todo"]
        log.use_projections(["todo", "other", "todo"])
        assert log.projections_used() == ["todo", "other"]


def test_state_shows_the_applications_projection_alone(app, capsys):
    name, path = app
    code, out, err = run(capsys, "--store", path, "--app", name, "state", "--json")
    assert code == 0, err
    assert json.loads(out)["states"] == {"todo": {"t1": "write docs"}}


def test_app_after_the_subcommand_and_from_the_environment(app, capsys, monkeypatch):
    name, path = app
    code, out, _ = run(capsys, "state", "--store", path, "--app", name, "--json")
    assert code == 0 and json.loads(out)["states"] == {"todo": {"t1": "write docs"}}
    monkeypatch.setenv("BRAIDLOG_APP", name)
    code, out, _ = run(capsys, "--store", path, "state", "--json")
    assert code == 0 and json.loads(out)["states"] == {"todo": {"t1": "write docs"}}


def test_without_the_app_the_missing_projection_is_named(app, capsys):
    _, path = app
    code, out, err = run(capsys, "--store", path, "state", "--json")
    assert code == 0
    assert json.loads(out)["states"] == {}  # never the seven agent-memory projections, empty
    assert "the store is used with 'todo', not found here" in err and "--app" in err


def test_rebuild_checkpoints_only_what_the_store_uses(app, capsys):
    name, path = app
    code, out, err = run(capsys, "--store", path, "--app", name, "rebuild")
    assert code == 0, err
    assert "rebuilt 1 projection(s)" in out
    with LmdbLog(path) as log:
        assert {n for n, _, _ in log.checkpoint_keys()} == {"todo"}


def test_cli_append_and_import_know_the_applications_kinds(app, capsys, tmp_path):
    name, path = app
    line = json.dumps({"braid_id": "me", "kind": "task_added", "ts": "2026-05-01T09:00:00Z",
                       "provenance": {"kind": "user"}, "confidence": 1.0,
                       "payload": {"task_id": "t2", "title": "ship it"}})
    (tmp_path / "task.json").write_text(line)
    code, _, err = run(capsys, "--store", path, "--app", name, "append", str(tmp_path / "task.json"))
    assert code == 0, err
    export = tmp_path / "todo.jsonl"
    assert run(capsys, "--store", path, "export", str(export))[0] == 0
    target = str(tmp_path / "restored.lmdb")
    assert run(capsys, "--store", target, "init")[0] == 0
    code, _, err = run(capsys, "--store", target, "--app", name, "import", str(export))
    assert code == 0, err


def test_a_module_that_does_not_exist_is_one_clear_error(app, capsys):
    _, path = app
    code, _, err = run(capsys, "--store", path, "--app", "no_such_module_here", "state")
    assert code == 1
    assert err.startswith("braidlog: error: app: cannot load application module 'no_such_module_here'")


def test_braidlog_open_keeps_the_projections_the_store_uses(app):
    name, path = app
    with braidlog.open(path) as braid:  # no --app: the app's projection is not found
        assert list(braid.projections) == []
    import os
    os.environ["BRAIDLOG_APP"] = name
    try:
        with braidlog.open(path) as braid:
            assert list(braid.projections) == ["todo"]
            assert braid.state("todo") == {"t1": "write docs"}
    finally:
        del os.environ["BRAIDLOG_APP"]


def test_braidlogs_own_families_come_through_the_entry_point():
    names = [p.name for p in discover()]
    assert names[:7] == ["beads", "knots", "trust", "episodes", "decisions", "fields", "memories"]
    chosen, missing = for_store(discover(), ["fields", "gone"])
    assert [p.name for p in chosen] == ["fields"] and missing == ["gone"]


def test_entry_points_of_an_installed_package_are_found(tmp_path):
    """A real installed distribution declaring the two entry point groups (a dist-info on
    sys.path, as pip writes it), seen from a fresh process."""
    site = tmp_path / "site"
    pkg = site / "todo_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(APP)
    info = site / "todo_pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: todo-pkg\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(textwrap.dedent("""\
        [braidlog.kinds]
        todo = todo_pkg
        [braidlog.projections]
        todo = todo_pkg:PROJECTIONS
        """))
    code = ("import braidlog.apps as a; print(','.join(p.name for p in a.discover())); "
            "import braidlog; print('task_added' in braidlog.REGISTRY)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}).stdout.split()
    assert out[0].split(",")[-1] == "todo" and out[1] == "True"
