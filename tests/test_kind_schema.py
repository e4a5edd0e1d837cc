"""Kinds declared in the log: a JSON Schema in a kind_declared delta, known to every process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import braidlog
from braidlog import LmdbLog, MemoryLog, ValidationError, declare_kind
from braidlog.cli import main
from braidlog.kind_schema import KindDeclared, schema_type
from tests.support import make_delta

NOTE = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "minLength": 1},
        "priority": {"type": "integer", "minimum": 0, "maximum": 5},
        "labels": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "status": {"enum": ["open", "done"]},
        "where": {"type": "object", "properties": {"file": {"type": "string"},
                                                   "line": {"type": "integer"}},
                  "required": ["file"]},
        "score": {"type": ["number", "null"]},
    },
    "required": ["text"],
    "additionalProperties": False,
}


def note(i: int, **payload):
    return make_delta(i, kind="note", payload=payload)


@pytest.fixture(params=["memory", "lmdb"])
def store(request, tmp_path):
    s = MemoryLog() if request.param == "memory" else LmdbLog(tmp_path / "store")
    yield s
    s.close()


def test_a_declared_kind_validates_its_payloads(store):
    assert "note" not in store.registry
    with pytest.raises(ValidationError, match="unknown kind 'note'.*braidlog kind add note"):
        store.append(note(1, text="before the declaration"))
    assert store.head().seq == 0
    seq = declare_kind(store, "note", NOTE, description="a user's note")
    assert seq == 1 and store.registry["note"].declared_at == 1
    assert store.append(note(2, text="hi", priority=5, labels=["a"], status="done",
                             where={"file": "x.py", "line": 3}, score=None)) == 2
    bad = [({"text": ""}, "payload.text"), ({"text": "x", "priority": 6}, "payload.priority"),
           ({"text": "x", "other": 1}, "unknown field `other`"), ({"priority": 1}, "`text`"),
           ({"text": "x", "status": "maybe"}, "payload.status"),
           ({"text": "x", "labels": ["a", "b", "c", "d"]}, "payload.labels"),
           ({"text": "x", "where": {"line": 1}}, "`file`"),
           ({"text": "x", "score": "high"}, "payload.score")]
    for payload, needle in bad:
        with pytest.raises(ValidationError, match="kind 'note'") as e:
            store.append(note(3, **payload))
        assert needle in str(e.value)
    assert store.head().seq == 2


def test_a_declaration_and_its_first_use_can_share_a_batch(store):
    decl = make_delta(1, kind="kind_declared", payload={"name": "note", "schema": NOTE})
    seqs = store.append_batch([decl, note(2, text="in the same batch")])
    assert seqs == [1, 2]
    with pytest.raises(ValidationError, match=r"delta 1: payload.priority"):
        store.append_batch([make_delta(3, kind="kind_declared",
                                       payload={"name": "memo", "schema": NOTE}),
                            note(4, text="x", priority=99)])
    assert store.head().seq == 2 and "memo" not in store.registry  # the refused batch left nothing


def test_a_new_version_may_only_add_optional_properties(store):
    declare_kind(store, "note", NOTE)
    store.append(note(1, text="v1"))
    v2 = json.loads(json.dumps(NOTE))
    v2["properties"]["mood"] = {"type": "string"}
    assert declare_kind(store, "note", v2) == 3
    spec = store.registry["note"]
    assert spec.version == 2 and sorted(spec.schemas) == [1, 2]
    store.append(note(4, text="v2", mood="calm"))
    assert store.read(4).delta.payload == {"text": "v2", "mood": "calm", "_v": 2}
    assert braidlog.typed(store.read(2).delta, store.registry).text == "v1"  # v1 read as is

    changed = json.loads(json.dumps(v2))
    changed["properties"]["text"] = {"type": "integer"}
    required = json.loads(json.dumps(v2))
    required["properties"]["due"] = {"type": "string"}
    required["required"] = ["text", "due"]
    dropped = json.loads(json.dumps(v2))
    del dropped["properties"]["priority"]
    for schema, needle in [(changed, "payload.schema.properties.text"),
                           (required, "changes ['required']"),
                           (dropped, "payload.schema.properties.priority")]:
        with pytest.raises(ValidationError, match="new version") as e:
            declare_kind(store, "note", schema)
        assert needle in str(e.value)
    with pytest.raises(ValidationError, match="next declaration is version 3"):
        declare_kind(store, "note", v2, version=5)
    with pytest.raises(ValidationError, match="owned by 'app'"):
        declare_kind(store, "note", v2, owner="someone-else")
    assert store.head().seq == 4


@pytest.mark.parametrize("name, schema, needle", [
    ("message", {"type": "object"}, "declared in Python"),
    ("kind_declared", {"type": "object"}, "declared in Python"),
    ("note", {"type": "array"}, "top level"),
    ("note", {"type": "object", "properties": {"x": {"oneOf": []}}}, "oneOf not supported"),
    ("note", {"type": "object", "properties": {"x": {"type": "date"}}}, "'date' is not a JSON Schema type"),
    ("note", {"type": "object", "required": ["y"]}, "not among the properties"),
    ("note", {"type": "object", "properties": {"x": {"type": "string", "minimum": 1}}}, "does not apply"),
    ("note", {"type": "object", "properties": {"_v": {"type": "string"}}}, "identifier"),
    ("2bad", {"type": "object"}, "must start with a letter"),
])
def test_bad_declarations_are_refused_by_rule(store, name, schema, needle):
    with pytest.raises(ValidationError) as e:
        declare_kind(store, name, schema)
    assert needle in str(e.value)
    assert store.head().seq == 0


def test_schema_subset_maps_to_msgspec_types():
    import msgspec

    t = schema_type(NOTE, "note")
    assert msgspec.convert({"text": "x", "score": 1.5}, t).score == 1.5
    with pytest.raises(ValueError, match="additionalProperties"):
        KindDeclared("n", {"type": "object", "additionalProperties": {"type": "string"}})


def test_another_process_sees_a_declaration_at_its_next_append(tmp_path):
    path = tmp_path / "store"
    with LmdbLog(path) as mine:
        assert "note" not in mine.registry
        code = ("import braidlog, json, sys; log = braidlog.LmdbLog(sys.argv[1]); "
                "braidlog.declare_kind(log, 'note', json.loads(sys.argv[2])); log.close()")
        subprocess.run([sys.executable, "-c", code, str(path), json.dumps(NOTE)], check=True)
        assert mine.append(note(2, text="declared by the other process")) == 2


def test_an_unknown_kind_reads_the_log_again_only_once_something_was_committed(tmp_path):
    from braidlog.kind_schema import StoreKinds

    looks = []
    with LmdbLog(tmp_path / "store") as log:
        def source(after):
            looks.append(after)
            return iter(())
        kinds = StoreKinds(log.registry.parent, source, log.last_commit)
        for _ in range(3):
            assert kinds.get("not.declared") is None
        assert len(looks) == 1
        log.append(make_delta(1))
        assert kinds.get("not.declared") is None and len(looks) == 2


def test_an_applications_export_restores_from_the_shell(tmp_path, capsys):
    src, dst = tmp_path / "src", tmp_path / "dst"
    with LmdbLog(src) as log:
        declare_kind(log, "note", NOTE)
        log.append(note(2, text="kept"))
    export = tmp_path / "notes.jsonl"
    assert main(["--store", str(src), "export", str(export)]) == 0
    assert main(["--store", str(dst), "init"]) == 0
    assert main(["--store", str(dst), "import", str(export)]) == 0
    with LmdbLog(dst) as log:
        assert log.read(2).delta.payload == {"text": "kept"}
        assert log.registry["note"].declared_at == 1


def test_cli_kind_add_and_list(tmp_path, capsys):
    store, schema = str(tmp_path / "store"), tmp_path / "note.json"
    schema.write_text(json.dumps(NOTE))
    assert main(["--store", store, "init"]) == 0
    capsys.readouterr()
    assert main(["--store", store, "kind", "add", "note", "--schema", str(schema), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"kind": "note", "version": 1, "owner": "app", "seq": 1,
                                                   "changed": True}
    assert main(["--store", store, "kind", "list", "--json"]) == 0
    rows = {r["kind"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["note"] == {"kind": "note", "owner": "app", "versions": [1], "declared": "store seq 1"}
    assert rows["message"]["declared"] == "python"
    schema.write_text("{not json")
    assert main(["--store", store, "kind", "add", "memo", "--schema", str(schema)]) == 1
    assert "--schema" in capsys.readouterr().err
