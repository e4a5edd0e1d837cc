"""The MCP test harness (a real SDK client driven from synchronous tests), and the parts of
``braidlog mcp`` that need no running server: schemas derived from the Structs, argument
conversion, the CLI's refusals and its install hint.

The servers themselves are driven in test_mcp_stdio.py (a subprocess over stdio) and
test_mcp_http.py (a subprocess over streamable HTTP with a bearer token).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is the braidlog[mcp] extra (the test extra has it)")

import msgspec
from jsonschema import Draft202012Validator

from braidlog.cli import main
from tests.support.mcp import READ_TOOLS, WRITE_TOOLS

# ----------------------------------------------------------------------- schemas, in process

def test_tool_schemas_are_the_structs_schemas(tmp_path):
    """Every input schema is a valid JSON Schema whose properties are the command Struct's
    fields (less what the server stamps) plus braid_id and provenance_kind; every tool has an
    output schema; read-only servers list no write tool."""
    from braidlog.mcp import Backend, build_server
    from braidlog.projections import decisions, fields, memories

    backend = Backend(str(tmp_path / "s.lmdb"))
    try:
        server = build_server(backend)
        tools = {t.name: t for t in server._tool_manager.list_tools()}
    finally:
        backend.close()
    assert set(tools) == READ_TOOLS | WRITE_TOOLS
    for name, tool in tools.items():
        Draft202012Validator.check_schema(tool.parameters)
        Draft202012Validator.check_schema(tool.output_schema)
        assert tool.parameters["type"] == "object" and tool.output_schema["type"] == "object", name
        assert tool.parameters.get("additionalProperties") is False, name
    for name, cls, stamped in (("record_decision", decisions.RecordDecision, set()),
                               ("supersede_decision", decisions.SupersedeDecision, set()),
                               ("accept_proposal", decisions.AcceptProposal, set()),
                               ("reject_proposal", decisions.RejectProposal, set()),
                               ("draft_proposal", decisions.DraftProposal, set()),
                               ("revise_field", fields.ReviseField, {"provenance"}),
                               ("add_memory", memories.AddMemory, set())):
        props = tools[name].parameters["properties"]
        assert set(props) == (set(cls.__struct_fields__) - stamped) | {"braid_id", "provenance_kind"}
        required = {f.name for f in msgspec.structs.fields(cls) if f.required} - stamped
        assert set(tools[name].parameters.get("required", [])) == required, name
    assert tools["record_decision"].parameters["properties"]["target"]["minLength"] == 3
    assert tools["search_decisions"].parameters["properties"]["mode"]["enum"] == ["audit", "balanced", "strict"]
    envelope = tools["append"].parameters["properties"]
    assert set(envelope) == {"braid_id", "kind", "payload", "confidence", "tags", "refs", "provenance", "embed"}
    assert set(tools["append"].parameters["required"]) == {"braid_id", "kind", "payload"}
    assert envelope["confidence"]["maximum"] == 1.0 or "anyOf" in envelope["confidence"]


def test_recall_carries_the_options_recall_accepts():
    """The recall tool's arguments follow ``Recall.recall``'s signature: k, the filters, and
    any plain keyword option (a search mode once recall has one)."""
    import inspect

    from braidlog.mcp.tools import recall_args
    from braidlog.recall import Recall

    params = set(inspect.signature(Recall.recall).parameters)
    fields = set(recall_args().__struct_fields__)
    assert {"query", "k", "as_of", "space", "braid", "kinds", "tags", "namespace", "workspace"} <= fields
    assert ("mode" in fields) == ("mode" in params)
    assert fields - {"query", "as_of", "space", "context"} <= params  # context: its context_bytes


@pytest.mark.parametrize("arguments, field, rule", [
    ({"title": "t", "target": "abc"}, "rationale", "is required"),
    ({"title": "t", "target": "abc", "rationale": "long enough here", "colour": "red"}, "colour",
     "is not an argument"),
    ({"title": "t", "target": "ab", "rationale": "long enough here"}, "target", "length >= 3"),
    ({"title": "t", "target": "abc", "rationale": "long enough here", "intent": {"rationale": "x"}},
     "intent.resolution_type", "is required"),
])
def test_a_bad_argument_is_a_validation_error_naming_it(arguments, field, rule):
    from braidlog import ValidationError
    from braidlog.mcp.projection_tools import projection_tools
    from braidlog.mcp.schema import parse

    spec = next(s for s in projection_tools() if s.name == "record_decision")
    with pytest.raises(ValidationError) as e:
        parse(spec.args, arguments)
    assert e.value.field == field and rule in e.value.rule


def test_objects_sent_as_json_strings_are_decoded():
    """Some clients send a nested object as a JSON string; it is decoded, a plain string is not."""
    from braidlog.mcp.schema import parse
    from braidlog.mcp.tools import AppendArgs

    a = parse(AppendArgs, {"braid_id": "b", "kind": "message", "payload": '{"text": "hi"}'})
    assert a.payload == {"text": "hi"}
    a = parse(AppendArgs, {"braid_id": '{"x": 1}', "kind": "message", "payload": {}})
    assert a.braid_id == '{"x": 1}'


# -------------------------------------------------------------------------------- the CLI

def test_binding_beyond_loopback_needs_a_token(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("BRAIDLOG_MCP_TOKEN", raising=False)
    store = tmp_path / "s.lmdb"
    assert main(["--store", str(store), "mcp", "--http", "0.0.0.0:0"]) == 1
    err = capsys.readouterr().err
    assert "--http: 0.0.0.0 is reachable from other machines" in err and "BRAIDLOG_MCP_TOKEN" in err
    assert not store.exists()  # refused before anything was opened
    assert main(["--store", str(store), "mcp", "--token", "t"]) == 1
    assert "--token: a token guards HTTP only" in capsys.readouterr().err


def test_without_the_sdk_the_command_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    for name in [m for m in sys.modules if m == "mcp" or m.startswith(("mcp.", "braidlog.mcp"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)  # `import mcp` now fails as if not installed
    assert main(["--store", str(tmp_path / "s.lmdb"), "mcp"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("braidlog: error: braidlog.mcp needs the mcp extra, which is not installed here")
    assert err.endswith("pip install 'braidlog[mcp]' (from a braidlog clone: pip install '.[mcp]')\n")
    assert err.count("\n") == 1
    assert not (tmp_path / "s.lmdb").exists()


def test_the_cli_imports_the_sdk_only_when_the_command_runs():
    code = ("import sys, braidlog.cli; braidlog.cli.build_parser(); "
            "print(any(m == 'mcp' or m.startswith(('mcp.', 'braidlog.mcp')) for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_without_the_recall_extra_the_rest_is_served(tmp_path):
    """With hnswlib missing (as without braidlog[recall]), the server lists no recall and no
    decision search, appends without a vector by default, and says why when asked for one."""
    code = f"""
import sys
sys.modules["hnswlib"] = None  # `import hnswlib` fails, as without the recall extra
import anyio
from mcp import Client
from braidlog.mcp import Backend, build_server

backend = Backend({str(tmp_path / 's.lmdb')!r})
async def main():
    async with Client(build_server(backend)) as c:
        names = {{t.name for t in (await c.list_tools()).tools}}
        print(sorted({{"recall", "search_decisions"}} & names), "append" in names)
        r = await c.call_tool("append", {{"braid_id": "b", "kind": "message", "payload": {{"text": "hi"}}}})
        print(r.structured_content["embedded"])
        r = await c.call_tool("append", {{"braid_id": "b", "kind": "message", "payload": {{"text": "hi"}},
                                          "embed": True}})
        print(r.content[0].text)
try:
    anyio.run(main)
finally:
    backend.close()
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:2] == ["[] True", "False"]
    assert lines[2] == ("Error executing tool append: embed: needs braidlog's recall extra (pip install "
                        "'.[recall]' where the server runs); pass embed false")


#: A valid call of every tool; the property test below starts from these and breaks them.
EXAMPLES = {
    "append": {"braid_id": "b", "kind": "message", "payload": {"text": "hello there"}},
    "head": {}, "verify": {}, "show": {"ref": 1}, "kinds": {"kind": "message"},
    "history": {"braid_id": "b"}, "diff": {"a": 0}, "explain": {"entity_id": "t/f"},
    "state_at": {"projection": "fields", "at": 1}, "recall": {"query": "hello"},
    "record_decision": {"title": "A title", "target": "tgt", "rationale": "a long enough reason"},
    "supersede_decision": {"title": "A title", "target": "tgt", "rationale": "a long enough reason",
                           "old_decision_ids": ["01J0000000000000000000000Z"]},
    "draft_proposal": {"proposal": {"title": "P", "target": "ptg", "rationale": "a long enough reason"}},
    "accept_proposal": {"proposal_id": "01J0000000000000000000000Z"},
    "reject_proposal": {"proposal_id": "01J0000000000000000000000Z", "reason": "no"},
    "search_decisions": {"query": "title"},
    "revise_field": {"topic_id": "t", "field": "f", "value": "v"},
    "get_field": {"topic_id": "t", "field": "f", "history": True},
    "add_memory": {"memory": {"type": "fact", "content": "water is wet", "subject": "water"}},
    "list_memories": {}, "episodes": {"braid_id": "b"}, "knots": {"braid_id": "b"},
    "forks": {"braid_id": "b"}, "trust": {"subject_id": "x"},
}


def test_any_arguments_give_a_result_or_a_braidlog_error(tmp_path_factory):
    """Every tool's valid example, with any of its arguments (or a stray one) given any JSON
    value, ends in a result or a BraidlogError, which the client reads as the field and the
    rule: never another exception, which the client would see only as "Error executing tool"."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from braidlog import BraidlogError
    from braidlog.mcp import Backend
    from braidlog.mcp.projection_tools import projection_tools
    from braidlog.mcp.schema import encode, json_schema, parse
    from braidlog.mcp.tools import log_tools

    specs = {s.name: s for s in [*log_tools(), *projection_tools()]}
    assert set(specs) == set(EXAMPLES)
    json_values = st.recursive(
        st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=30),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
        max_leaves=8)
    names = {n: sorted(json_schema(s.args).get("properties", {})) + ["stray"] for n, s in specs.items()}

    def broken(name: str):
        changes = st.dictionaries(st.sampled_from(names[name]), json_values, max_size=2)
        return st.tuples(st.just(name), changes.map(lambda c: {**EXAMPLES[name], **c}))
    calls = st.sampled_from(sorted(specs)).flatmap(broken)
    backend = Backend(str(tmp_path_factory.mktemp("mcp-any") / "s.lmdb"))
    seen = {"ok": 0, "refused": 0}

    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(calls)
    def check(call):
        name, arguments = call
        try:
            encode(specs[name].run(backend, parse(specs[name].args, arguments)))
            seen["ok"] += 1
        except BraidlogError:
            seen["refused"] += 1

    try:
        check()
    finally:
        backend.close()
    assert seen["ok"] >= 15 and seen["refused"] >= 15, seen  # both paths were exercised


def test_a_port_in_use_is_one_line(tmp_path):
    """Not uvicorn's traceback: the command names the flag, the address and what to do."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "braidlog", "--store", str(tmp_path / "s"), "mcp",
                            "--http", f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert r.stderr.startswith(f"braidlog: error: --http: cannot listen on 127.0.0.1:{port}")
    assert r.stderr.count("\n") == 1
