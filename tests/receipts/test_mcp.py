"""The MCP recall tool records a context receipt when asked and returns its id, driven by the
official MCP SDK's client against ``braidlog mcp`` over stdio (a real subprocess)."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is the braidlog[mcp] extra (the test extra has it)")

from braidlog import LmdbLog
from braidlog.receipts import read_receipt, sha256_hex
from tests.support.mcp import stdio


def test_recall_records_a_receipt_when_asked(store_path):
    with stdio(store_path) as mcp:
        assert {"record", "run", "turn", "model", "context", "hash_query"} <= \
            set(mcp.tools["recall"].input_schema["properties"])
        plain = mcp.ok("recall", {"query": "coffee", "k": 2})
        assert "context_id" not in plain
        got = mcp.ok("recall", {"query": "what coffee does she drink", "k": 2, "record": True,
                                "run": "session-1", "turn": "4", "model": "a-model",
                                "context": "system: ...\nmemory: coffee black"})
        rid = got["context_id"]
        assert rid and [h["seq"] for h in got["hits"]]
        shown = mcp.ok("context_show", {"ref": rid})
        assert (shown["run"], shown["turn"], shown["model"]) == ("session-1", "4", "a-model")
        assert [i["seq"] for i in shown["items"]] == [h["seq"] for h in got["hits"]]
        assert "coffee" in shown["items"][0]["text"] and shown["request"]["k"] == 2
        again = mcp.ok("context_replay", {"ref": rid})
        assert again["same"] is True and again["summary"].startswith("same:")
        assert "not a context receipt" in mcp.error("context_show", {"ref": 1})
        assert "no delta" in mcp.error("context_replay", {"ref": "01ARZ3NDEKTSV4RRFFQ69G5FAV"})
        for bad, rule in [({"record": True}, "run"), ({"run": "r", "turn": "t"}, "record"),
                          ({"record": True, "run": "", "turn": "t"}, "run")]:
            assert rule in mcp.error("recall", {"query": "coffee", **bad})
    with LmdbLog(store_path) as log:
        r = read_receipt(log, rid).receipt
        assert (r.run, r.turn, r.model) == ("session-1", "4", "a-model")
        assert [(i.seq, i.delta_id) for i in r.items] == [(h["seq"], h["delta_id"]) for h in got["hits"]]
        assert r.context_sha256 == sha256_hex("system: ...\nmemory: coffee black")
        assert r.request.query == "what coffee does she drink"
        assert log.head().seq == 7  # the refused calls wrote nothing


def test_a_read_only_server_refuses_to_record(store_path):
    with stdio(store_path, "--read-only") as mcp:
        assert mcp.tools["recall"].annotations.read_only_hint is True  # here it cannot write
        assert "read-only" in mcp.error("recall", {"query": "coffee", "record": True, "run": "r",
                                                   "turn": "t"})
        assert mcp.ok("recall", {"query": "coffee"})["hits"]
