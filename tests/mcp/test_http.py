"""``braidlog mcp --http`` on a free loopback port, driven by the MCP SDK's streamable HTTP client.

One server process serves the module, started with a bearer token (from the environment) and
``--allow-provenance user``: requests without the token or with a wrong one are refused before
any MCP message is read; two clients append at once through it.
"""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is the braidlog[mcp] extra (the test extra has it)")

import httpx2
from mcp.shared.exceptions import MCPError

from tests.support.mcp import READ_TOOLS, WRITE_TOOLS, HttpServer, seed

TOKEN = "s3cret-token-for-tests"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("mcp-http") / "store.lmdb"
    return path, seed(path)


@pytest.fixture(scope="module")
def server(store):
    s = HttpServer(store[0], "--allow-provenance", "user", token=TOKEN)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(scope="module")
def mcp(server):
    with server.session(TOKEN) as session:
        yield session


def test_every_request_needs_the_token(server, mcp):
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"},
                 {"Authorization": f"Bearer {TOKEN}x"}):
        r = httpx2.post(server.url, json=initialize, headers={**headers, **auth})
        assert r.status_code == 401, auth
        assert r.headers["www-authenticate"].startswith("Bearer ")
        assert r.json()["error"] == "invalid_token"
    r = httpx2.post(server.url, json=initialize, headers={**headers, "Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200
    before = mcp.ok("head")["head"]
    with pytest.raises(BaseException) as e:  # the SDK's own client, with the wrong token
        with server.session("wrong"):
            pass
    assert any(isinstance(x, MCPError) for x in _leaves(e.value)), e.value
    assert mcp.ok("head")["head"] == before


def test_tools_over_http(mcp, store):
    assert set(mcp.tools) == READ_TOOLS | WRITE_TOOLS
    out = mcp.ok("append", {"braid_id": "http-agent", "kind": "message",
                            "payload": {"text": "Served over streamable HTTP."}})
    assert mcp.ok("show", {"ref": out["id"]})["delta"]["provenance"] == {"kind": "assistant", "source": "mcp"}
    mcp.ok("revise_field", {"topic_id": "http", "field": "port", "value": 8765, "field_type": "int"})
    assert mcp.ok("get_field", {"topic_id": "http", "field": "port"})["field"]["value"] == 8765
    hits = mcp.ok("recall", {"query": "streamable HTTP", "k": 1})["hits"]
    assert hits[0]["delta_id"] == out["id"]
    assert mcp.read("braidlog://head")["head"] == mcp.ok("head")["head"]
    assert "target: Expected `str` of length >= 3" in mcp.error(
        "record_decision", {"title": "t", "target": "ab", "rationale": "long enough reason"})


def test_a_server_that_allows_it_lets_a_human_pass_the_trust_boundary(mcp):
    """Started with --allow-provenance user, the server lets a call claim to be a human: the
    HUMAN_ONLY namespace then takes the decision, and the delta says who claimed it and how."""
    decision = {"title": "Keep the audit chain", "target": "audit-chain",
                "rationale": "Auditors need to prove nothing was rewritten.", "namespace": "guarded"}
    before = mcp.ok("head")["head"]
    assert "HUMAN_ONLY" in mcp.error("record_decision", decision)
    assert mcp.ok("head")["head"] == before
    out = mcp.ok("record_decision", {**decision, "provenance_kind": "user"})
    stored = mcp.ok("show", {"ref": out["deltas"][0]["id"]})["delta"]
    assert stored["provenance"] == {"kind": "user", "source": "mcp"}


def test_two_clients_append_at_once(server, mcp):
    """Two MCP sessions append concurrently through one server: each append lands once, in
    order per client, the seqs are gap-free and the chain verifies."""
    start = mcp.ok("head")["seq"]
    n = 20
    results: dict[str, list[int]] = {}
    errors: list[BaseException] = []
    with server.session(TOKEN) as other:
        def writer(name: str, session) -> None:
            try:
                results[name] = [session.ok("append", {
                    "braid_id": f"http-{name}", "kind": "message", "payload": {"text": f"{name} {i}"},
                    "embed": False})["seq"] for i in range(n)]
            except BaseException as e:  # reported below, with the thread's traceback
                errors.append(e)
                raise
        threads = [threading.Thread(target=writer, args=(name, s)) for name, s in (("a", mcp), ("b", other))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    seqs = sorted(results["a"] + results["b"])
    assert seqs == list(range(start + 1, start + 2 * n + 1))
    assert results["a"] == sorted(results["a"]) and results["b"] == sorted(results["b"])
    assert mcp.ok("verify")["ok"] is True
    for name in "ab":
        records = mcp.ok("history", {"braid_id": f"http-{name}", "limit": 100})["braid"]["records"]
        assert [r["delta"]["payload"]["text"] for r in reversed(records)] == [f"{name} {i}" for i in range(n)]


def _leaves(e: BaseException) -> list[BaseException]:
    inner = getattr(e, "exceptions", None)
    return [x for sub in inner for x in _leaves(sub)] if inner else [e]
