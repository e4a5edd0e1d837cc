"""``braidlog mcp`` over stdio, driven by the MCP SDK's own client against a real LMDB store.

One server process serves the whole module (the demo session plus a HUMAN_ONLY namespace);
a read-only server and a second writer process join it on the same store where a test needs
them. Every structured result has been checked by the client against the tool's output schema.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is the braidlog[mcp] extra (the test extra has it)")

from mcp.shared.exceptions import MCPError

import braidlog
from braidlog.projections import episodes, knots, trust
from tests.support.mcp import READ_TOOLS, WRITE_TOOLS, seed, stdio


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("mcp") / "store.lmdb"
    braid_id = seed(path)
    return path, braid_id


@pytest.fixture(scope="module")
def mcp(store):
    with stdio(store[0]) as session:
        yield session


def head(mcp) -> str:
    return mcp.ok("head")["head"]


# ---------------------------------------------------------------------------------- the log

def test_the_server_lists_every_tool_and_resource(mcp):
    assert set(mcp.tools) == READ_TOOLS | WRITE_TOOLS
    for name in READ_TOOLS - {"recall"}:
        assert mcp.tools[name].annotations.read_only_hint is True, name
    # recall writes a context receipt when asked (record): a write tool where it can write
    assert mcp.tools["recall"].annotations.read_only_hint is False
    assert mcp.tools["recall"].annotations.destructive_hint is False
    for name in WRITE_TOOLS:
        assert mcp.tools[name].annotations.read_only_hint is False, name
        assert mcp.tools[name].annotations.destructive_hint is False, name  # append-only
    assert mcp.tools["record_decision"].annotations.idempotent_hint is True  # [] once done
    assert mcp.tools["add_memory"].annotations.idempotent_hint is False  # a repeat may reinforce
    assert mcp.tools["append"].annotations.idempotent_hint is False
    resources = mcp.run(mcp.client.list_resources).resources
    templates = mcp.run(mcp.client.list_resource_templates).resource_templates
    assert [str(r.uri) for r in resources] == ["braidlog://head"]
    assert {t.uri_template for t in templates} == {"braidlog://delta/{delta_id}", "braidlog://braid/{braid_id}"}


def test_append_records_that_it_came_over_mcp(mcp):
    before = mcp.ok("head")
    out = mcp.ok("append", {"braid_id": "agent-7", "kind": "message",
                            "payload": {"text": "The deploy window is Thursday 14:00 UTC."},
                            "tags": ["plan"], "confidence": 0.8})
    # the space's first vectors written over MCP declare their embedder, just before them
    declared = mcp.ok("show", {"ref": before["seq"] + 1})["delta"]
    assert declared["kind"] == "embedder_declared" and declared["payload"]["spec"] == "hashing"
    assert out["seq"] == before["seq"] + 2 and out["embedded"] is True
    assert out["head"] == head(mcp)
    by_seq, by_id = mcp.ok("show", {"ref": out["seq"]}), mcp.ok("show", {"ref": out["id"]})
    assert by_seq == by_id and by_seq["hash"] == out["hash"]
    d = by_seq["delta"]
    assert d["provenance"] == {"kind": "assistant", "source": "mcp"}
    assert (d["braid_id"], d["kind"], d["tags"], d["confidence"]) == ("agent-7", "message", ["plan"], 0.8)
    assert d["vector"]["data"]  # base64 float32: recall finds it
    # a provenance the server allows by default, with a model named
    out = mcp.ok("append", {"braid_id": "agent-7", "kind": "observation", "payload": {"text": "CPU at 91%"},
                            "provenance": {"kind": "perception", "model": "probe-1"}, "embed": False})
    d = mcp.ok("show", {"ref": str(out["seq"])})["delta"]
    assert d["provenance"] == {"kind": "perception", "source": "mcp", "model": "probe-1"}
    assert "vector" not in d and out["embedded"] is False


def test_head_and_verify(mcp):
    h = mcp.ok("head")
    assert h["head"] == f"{h['seq']}:{h['hash']}"
    assert mcp.ok("verify") == {"ok": True, "verified": h["seq"], "head": h["head"], "against": None,
                                "seq": None, "error": None}
    assert mcp.ok("verify", {"against": h["head"]})["ok"] is True
    forged = f"{h['seq']}:{'0' * 64}"
    out = mcp.ok("verify", {"against": forged})
    assert out["ok"] is False and out["seq"] == h["seq"] and "differ from the head given" in out["error"]
    assert "SEQ:HASH" in mcp.error("verify", {"against": "12:nothex"})


BAD = [
    ("append", {"braid_id": "b", "kind": "message", "payload": {"text": "x"}, "confidence": 3},
     "confidence: Expected `float` <= 1.0"),
    ("append", {"braid_id": "b", "kind": "no_such_kind", "payload": {}}, "kind: unknown kind 'no_such_kind'"),
    ("append", {"braid_id": "b", "kind": "message", "payload": ["x"]}, "payload: Expected `object`"),
    ("append", {"braid_id": "", "kind": "message", "payload": {}}, "braid_id: Expected `str` of length >= 1"),
    ("append", {"braid_id": "b", "kind": "message", "payload": {"text": "x"},
                "provenance": {"kind": "tool", "source": "web"}}, "provenance.source: is stamped 'mcp'"),
    ("append", {"braid_id": "b", "kind": "message"}, "payload: is required"),
    ("append", {"braid_id": "b", "kind": "message", "payload": {}, "colour": 1}, "colour: is not an argument"),
    ("record_decision", {"title": "t", "target": "ab", "rationale": "long enough reason"},
     "target: Expected `str` of length >= 3"),
    ("record_decision", {"title": "t", "target": "abc", "rationale": "short"},
     "rationale: Expected `str` of length >= 10"),
    ("record_decision", {"title": "t", "target": "abc", "rationale": "long enough reason",
                         "provenance_kind": "wizard"}, "provenance_kind: Invalid enum value 'wizard'"),
    ("revise_field", {"topic_id": "a/b", "field": "f", "value": 1}, "topic_id: must be a string"),
    ("revise_field", {"topic_id": "t", "field": "f", "value": 1, "provenance": "llm"},
     "provenance: is not an argument"),
    ("add_memory", {"memory": {"type": "fact", "content": "x", "version": 3}}, "memory.version: is set by the library"),
    ("add_memory", {"memory": {"type": "no-such-type", "content": "x"}}, "memory.type: unknown type"),
    ("accept_proposal", {"proposal_id": "01J0000000000000000000000Z"}, "no such proposal"),
    ("show", {"ref": 10**9}, "ref: no delta with seq or id"),
    ("state_at", {"projection": "nope"}, "projection: no projection 'nope'"),
    ("history", {"entity_id": "x", "at": "yesterday"}, "at: 'yesterday' is not a seq, a delta id or an ISO-8601 time"),
    ("history", {"entity_id": "x", "at": "2026-01-01T00:00:00"}, "at: '2026-01-01T00:00:00' has no timezone"),
    ("history", {}, "entity_id: give entity_id or braid_id"),
    ("recall", {"query": ""}, "query: Expected `str` of length >= 1"),
    ("get_field", {"topic_id": "t"}, "field: is required"),
]


@pytest.mark.parametrize("tool, arguments, message", BAD, ids=[f"{t}-{m.split(':')[0]}" for t, _, m in BAD])
def test_bad_input_is_a_tool_error_naming_the_field_and_nothing_is_written(mcp, tool, arguments, message):
    before = head(mcp)
    text = mcp.error(tool, arguments)
    assert text.startswith(f"Error executing tool {tool}: ") and message in text, text
    assert head(mcp) == before


# --------------------------------------------------------------------------------- LedgerMind

def test_decisions_record_conflict_supersede_search(mcp):
    first = mcp.ok("record_decision", {"title": "Use LMDB for the log", "target": "storage-engine",
                                       "rationale": "One writer, many readers, and a hash chain on top.",
                                       "namespace": "mcp-test", "braid_id": "agent-7"})
    assert first["result"]["should_persist"] is True and first["result"]["reason"] == "Decision recorded"
    [written] = first["deltas"]
    assert (written["kind"], written["braid_id"]) == ("decision_recorded", "agent-7")
    stored = mcp.ok("show", {"ref": written["id"]})["delta"]
    assert stored["provenance"] == {"kind": "assistant", "source": "mcp"}
    assert mcp.ok("record_decision", {"title": "Use LMDB for the log", "target": "storage-engine",
                                      "rationale": "One writer, many readers, and a hash chain on top.",
                                      "namespace": "mcp-test"})["deltas"] == []  # already done
    before = head(mcp)
    text = mcp.error("record_decision", {"title": "Use SQLite", "target": "storage-engine",
                                         "rationale": "Everyone knows SQL already.", "namespace": "mcp-test"})
    assert "CONFLICT" in text and written["id"] in text
    assert head(mcp) == before
    second = mcp.ok("supersede_decision", {"title": "Use SQLite", "target": "storage-engine",
                                           "rationale": "Everyone knows SQL already.", "namespace": "mcp-test",
                                           "old_decision_ids": [written["id"]]})
    assert second["result"]["metadata"]["superseded"] == [written["id"]]
    hits = mcp.ok("search_decisions", {"query": "SQLite storage engine", "namespace": "mcp-test",
                                       "mode": "strict"})["results"]
    assert [h["id"] for h in hits] == [second["deltas"][0]["id"]] and hits[0]["status"] == "active"
    audit = mcp.ok("search_decisions", {"query": "storage engine", "namespace": "mcp-test", "mode": "audit"})
    assert {h["status"] for h in audit["results"]} == {"active", "superseded"}
    then = mcp.ok("search_decisions", {"query": "storage engine", "namespace": "mcp-test", "mode": "strict",
                                       "at": written["seq"]})
    assert [h["id"] for h in then["results"]] == [written["id"]]  # as it stood then


def test_proposals_draft_accept_reject(mcp):
    proposal = {"title": "Cache recall results", "target": "recall-cache",
                "rationale": "The same queries repeat within a session.", "namespace": "mcp-test"}
    drafted = mcp.ok("draft_proposal", {"proposal": proposal})
    pid = drafted["result"]["metadata"]["proposal_id"]
    accepted = mcp.ok("accept_proposal", {"proposal_id": pid})
    assert [d["kind"] for d in accepted["deltas"]] == ["decision_recorded", "proposal_accepted"]
    assert "accepted as decision" in accepted["result"]["reason"]
    text = mcp.error("reject_proposal", {"proposal_id": pid, "reason": "too late"})
    assert "it is accepted" in text
    other = mcp.ok("draft_proposal", {"proposal": {**proposal, "title": "Cache nothing",
                                                   "target": "recall-cache-2"}})
    oid = other["result"]["metadata"]["proposal_id"]
    rejected = mcp.ok("reject_proposal", {"proposal_id": oid, "reason": "caching hides staleness"})
    assert [d["kind"] for d in rejected["deltas"]] == ["proposal_rejected"]
    hits = mcp.ok("search_decisions", {"query": "cache nothing recall", "namespace": "mcp-test",
                                       "mode": "audit"})["results"]
    assert any(h["id"] == oid and h["status"] == "rejected" for h in hits)


def test_a_human_only_namespace_refuses_an_agent_and_writes_nothing(mcp):
    """The store's 'guarded' namespace is HUMAN_ONLY: an assistant's decision is refused as
    LedgerMind refuses it, and a call may not claim to be a human unless the server allows it."""
    before = head(mcp)
    decision = {"title": "Drop the audit chain", "target": "audit-chain",
                "rationale": "It costs a hash per append.", "namespace": "guarded"}
    text = mcp.error("record_decision", decision)
    assert ("namespace 'guarded' is HUMAN_ONLY, so recording a decision needs "
            "provenance 'user', not 'assistant'") in text
    text = mcp.error("record_decision", {**decision, "provenance_kind": "user"})
    assert "provenance_kind: this server does not let a caller claim provenance 'user'" in text
    assert "--allow-provenance user" in text
    text = mcp.error("draft_proposal", {"proposal": decision})
    assert "HUMAN_ONLY" in text
    text = mcp.error("append", {"braid_id": "b", "kind": "message", "payload": {"text": "hi"},
                                "provenance": {"kind": "system"}})
    assert "provenance.kind: this server does not let a caller claim provenance 'system'" in text
    assert head(mcp) == before


# ------------------------------------------------------------------------ MemState, typedmem

def test_fields_revise_and_get_with_history(mcp):
    first = mcp.ok("revise_field", {"topic_id": "user", "field": "city", "value": "Lisbon",
                                    "why_changed": "the user said so"})
    assert first["result"]["provenance"] == "mcp" and first["result"]["value"] == "Lisbon"
    second = mcp.ok("revise_field", {"topic_id": "user", "field": "city", "value": "Porto",
                                     "why_changed": "moved"})
    delta = mcp.ok("show", {"ref": second["deltas"][0]["id"]})["delta"]
    assert delta["payload"]["provenance"] == "mcp"
    assert delta["provenance"] == {"kind": "assistant", "source": "mcp"}
    now = mcp.ok("get_field", {"topic_id": "user", "field": "city"})
    assert now["field"]["value"] == "Porto" and now["field"]["history"] is None
    full = mcp.ok("get_field", {"topic_id": "user", "field": "city", "history": True})
    assert [r["value"] for r in full["field"]["history"]][:2] == ["Porto", "Lisbon"]
    assert full["field"]["revision_count"] >= 2
    then = mcp.ok("get_field", {"topic_id": "user", "field": "city", "at": first["deltas"][0]["seq"]})
    assert then["field"]["value"] == "Lisbon" and then["seq"] == first["deltas"][0]["seq"]
    assert mcp.ok("get_field", {"topic_id": "user", "field": "nothing"})["field"] is None


def test_memories_add_and_list(mcp):
    added = mcp.ok("add_memory", {"memory": {"type": "preference", "content": "Prefers tea to coffee",
                                             "subject": "drinks", "workspace": "mcp-test", "tags": ["food"]}})
    record = added["result"]
    assert record["content"] == "Prefers tea to coffee" and record["version"] == 1
    listed = mcp.ok("list_memories", {"workspace": "mcp-test"})
    assert [m["id"] for m in listed["memories"]] == [record["id"]] and listed["count"] == 1
    assert mcp.ok("list_memories", {"workspace": "mcp-test", "tag": "nope"})["memories"] == []
    before = mcp.ok("list_memories", {"workspace": "mcp-test", "at": added["deltas"][0]["seq"] - 1})
    assert before["memories"] == []
    stored = mcp.ok("show", {"ref": added["deltas"][0]["id"]})["delta"]
    assert stored["provenance"] == {"kind": "assistant", "source": "mcp"}


# ----------------------------------------------------------------------------------- audit

def test_history_explain_state_at_diff(mcp, store):
    made = mcp.ok("revise_field", {"topic_id": "audit-topic", "field": "owner", "value": "ana"})
    mcp.ok("revise_field", {"topic_id": "audit-topic", "field": "owner", "value": "bo", "why_changed": "handover"})
    h = mcp.ok("history", {"entity_id": "audit-topic/owner"})["entity"]
    assert [s["delta"]["payload"]["value"] for s in h["steps"]] == ["ana", "bo"]
    assert h["steps"][1]["reasons"] == {"why_changed": "handover"}
    assert h["current"]["fields"]["value"] == "bo"
    early = mcp.ok("history", {"entity_id": "audit-topic/owner", "at": made["deltas"][0]["id"]})
    assert len(early["entity"]["steps"]) == 1
    out = mcp.ok("explain", {"entity_id": "audit-topic/owner"})
    assert "handover" in out["text"] and out["current"]["fields"]["value"] == "bo"
    seq = made["deltas"][0]["seq"]
    state = mcp.ok("state_at", {"projection": "fields", "at": seq, "entity_id": "audit-topic"})
    assert state["found"] is True and state["state"]["fields"]["owner"]["value"] == "ana"
    whole = mcp.ok("state_at", {"projection": "fields", "at": seq - 1})
    assert "audit-topic" not in whole["state"]["topics"] and whole["seq"] == seq - 1
    gone = mcp.ok("state_at", {"projection": "fields", "at": seq - 1, "entity_id": "audit-topic"})
    assert gone["found"] is False
    d = mcp.ok("diff", {"a": seq - 1, "projections": ["fields"]})
    added = [c["key"] for c in d["projections"]["fields"]["added"]]
    assert "audit-topic" in added and d["a"] == seq - 1
    braid = mcp.ok("history", {"braid_id": store[1], "limit": 3})["braid"]
    assert len(braid["records"]) == 3 and braid["count"] > 3
    seqs = [r["seq"] for r in braid["records"]]
    assert seqs == sorted(seqs, reverse=True) and all("vector" not in r["delta"] for r in braid["records"])
    assert "no delta refers to 'nothing-here'" in mcp.error("explain", {"entity_id": "nothing-here"})


def test_recall_by_meaning_with_filters_and_as_of(mcp, store):
    text = "The migration to the new billing database is scheduled for Friday."
    out = mcp.ok("append", {"braid_id": "agent-recall", "kind": "message", "payload": {"text": text}})
    hits = mcp.ok("recall", {"query": "billing database migration", "k": 3})["hits"]
    assert hits[0]["delta_id"] == out["id"] and hits[0]["delta"]["payload"]["text"] == text
    assert all(hits[i]["score"] >= hits[i + 1]["score"] for i in range(len(hits) - 1))
    only = mcp.ok("recall", {"query": "billing database migration", "braid": [store[1]], "k": 5})["hits"]
    assert only and all(h["delta"]["braid_id"] == store[1] for h in only)
    before = mcp.ok("recall", {"query": "billing database migration", "as_of": out["seq"] - 1, "k": 5})
    assert before["as_of"] == out["seq"] - 1 and out["id"] not in [h["delta_id"] for h in before["hits"]]
    if "mode" in mcp.tools["recall"].input_schema["properties"]:  # keyword and hybrid recall
        for mode in ("keyword", "hybrid"):
            hits = mcp.ok("recall", {"query": "billing migration Friday", "mode": mode, "k": 3})["hits"]
            assert hits[0]["delta_id"] == out["id"], mode
        assert "mode: Invalid enum value" in mcp.error("recall", {"query": "x", "mode": "psychic"})


def test_kinds_lists_payload_schemas(mcp):
    kinds = {k["kind"]: k for k in mcp.ok("kinds")["kinds"]}
    assert {"message", "decision_recorded", "field_revised", "memory_added"} <= set(kinds)
    assert kinds["decision_recorded"]["owner"] == "decisions"
    assert "target" in kinds["decision_recorded"]["payload_schema"]["properties"]
    assert "kind: unknown kind 'zzz'" in mcp.error("kinds", {"kind": "zzz"})


# ------------------------------------------------------------------------------ Braid reads

def test_braid_reads_match_the_projections(mcp, store):
    path, braid_id = store
    with braidlog.open(str(path), readonly=True, create=False) as braid:
        ep_state, kn_state, tr_state = braid.state("episodes"), braid.state("knots"), braid.state("trust")
        want_episodes = [e.id for e in episodes.episodes(ep_state, braid_id)]
        want_knots = [k.knot_id for k in knots.tied_knots(kn_state, braid_id)]
        hypothesis = next(iter(tr_state.hypotheses))
        now = datetime.now(UTC)
        want_trust = trust.trust_of(tr_state, hypothesis, now)
        pending = [e.id for e in episodes.pending_forks(ep_state, braid_id)]
    assert want_episodes and want_knots
    got = mcp.ok("episodes", {"braid_id": braid_id})
    assert [e["id"] for e in got["episodes"]] == want_episodes
    one = mcp.ok("episodes", {"episode_id": want_episodes[0]})["episodes"]
    assert [e["id"] for e in one] == want_episodes[:1]
    got = mcp.ok("knots", {"braid_id": braid_id})
    assert [k["knot_id"] for k in got["knots"] if k["stage"] == "tied"] == want_knots
    assert mcp.ok("knots", {"knot_id": want_knots[0]})["knots"][0]["tied"]["summary"]
    forks = mcp.ok("forks", {"braid_id": braid_id})
    assert [e["id"] for e in forks["pending"]] == pending
    assert len(forks["expiries"]) == len(pending)
    t = mcp.ok("trust", {"subject_id": hypothesis})
    assert t["hypothesis"]["hypothesis_id"] == hypothesis and t["hypothesis_status"]
    assert (t["trust"] is None) == (want_trust is None)
    if want_trust is not None:
        assert t["trust"]["source"] == want_trust.source
    assert "give braid_id or knot_id" in mcp.error("knots", {})


# ------------------------------------------------------------------------------- resources

def test_resources(mcp, store):
    h = mcp.read("braidlog://head")
    assert h["head"] == head(mcp)
    rec = mcp.read(f"braidlog://delta/{h['seq']}")
    assert rec["seq"] == h["seq"] and rec["hash"] == h["hash"]
    assert mcp.read(f"braidlog://delta/{rec['delta']['id']}") == rec
    recent = mcp.read(f"braidlog://braid/{store[1]}")
    assert recent["braid_id"] == store[1] and 0 < len(recent["records"]) <= 20 <= recent["count"]
    with pytest.raises(MCPError, match="no delta with id or seq"):
        mcp.read("braidlog://delta/01J0000000000000000000000Z")
    with pytest.raises(MCPError, match="holds no delta"):
        mcp.read("braidlog://braid/no-such-braid")


# ----------------------------------------------------------------------- read-only, together

def test_read_only_serves_reads_and_no_writes(mcp, store):
    before = head(mcp)
    with stdio(store[0], "--read-only") as ro:
        assert set(ro.tools) == READ_TOOLS
        assert "Unknown tool: append" in ro.error("append", {"braid_id": "b", "kind": "message",
                                                             "payload": {"text": "x"}})
        assert ro.ok("head")["head"] == before
        assert ro.ok("verify")["ok"] is True
        assert ro.ok("recall", {"query": "database", "k": 2})["hits"]
        assert ro.ok("get_field", {"topic_id": "user", "field": "city"})["field"] is not None
        assert ro.read("braidlog://head")["head"] == before
        # it follows what another process writes
        out = mcp.ok("append", {"braid_id": "agent-7", "kind": "message", "payload": {"text": "seen?"}})
        assert ro.ok("show", {"ref": out["id"]})["seq"] == out["seq"]


@pytest.mark.slow  # a second server process; test_mcp_http.py has two clients on one server
def test_two_clients_append_at_once(mcp, store):
    """Two clients, each with its own server process (as two desktop hosts would run them),
    append concurrently to one store: every append lands once, the seqs are gap-free, the
    chain verifies."""
    start = mcp.ok("head")["seq"]
    n = 15
    results: dict[str, list[int]] = {}
    with stdio(store[0]) as other:
        def writer(name: str, session) -> None:
            results[name] = [session.ok("append", {"braid_id": f"together-{name}", "kind": "message",
                                                    "payload": {"text": f"{name} {i}"}})["seq"]
                             for i in range(n)]
        threads = [threading.Thread(target=writer, args=(name, s)) for name, s in (("a", mcp), ("b", other))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        end = other.ok("head")["seq"]
    seqs = sorted(results["a"] + results["b"])
    assert seqs == list(range(start + 1, start + 2 * n + 1)) and end == start + 2 * n
    assert results["a"] == sorted(results["a"]) and results["b"] == sorted(results["b"])
    assert mcp.ok("verify")["ok"] is True
    for name in "ab":
        braid = mcp.ok("history", {"braid_id": f"together-{name}", "limit": 100})["braid"]
        assert [r["delta"]["payload"]["text"] for r in reversed(braid["records"])] == [f"{name} {i}" for i in range(n)]

