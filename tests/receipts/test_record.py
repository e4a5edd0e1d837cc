"""Context receipts written from Python: ``Braid.record_context`` and ``Recall.recall(...,
record=True)``; the kind's rules on every path (shape, and citations inside the write
transaction), with nothing written when one breaks; replay of a recorded request."""

from __future__ import annotations

import hashlib

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import braidlog
from braidlog import BraidlogError, LmdbLog, ValidationError
from braidlog.recall import Recall
from braidlog.recall.replay import replay
from braidlog.receipts import CONTEXT_USED, ContextUsed, RecallRequest, read_receipt, sha256_hex


def test_record_context_names_the_items_and_the_context_digest(braid):
    ids = [braid.log.read(s).delta.id for s in (1, 2, 3)]
    hit = braid.recall("coffee", 1)[0]
    rid = braid.record_context([hit, 2, ids[2], {"seq": 4, "role": "retrieved", "score": 0.5}],
                               run="run-1", turn=7, model="claude-x", context_bytes="the prompt")
    got = read_receipt(braid, rid)
    r = got.receipt
    assert got.delta.kind == CONTEXT_USED and got.delta.braid_id == "context"
    assert (r.run, r.turn, r.model) == ("run-1", "7", "claude-x")
    assert [(i.seq, i.rank, i.role) for i in r.items] == [
        (hit.seq, 1, "injected"), (2, 2, "injected"), (3, 3, "injected"), (4, 1, "retrieved")]
    assert r.items[1].delta_id == ids[1] and r.items[3].score == 0.5
    assert r.context_sha256 == hashlib.sha256(b"the prompt").hexdigest() and r.context_size == 10
    assert read_receipt(braid, got.seq).delta.id == rid  # by seq too


def test_recall_with_record_returns_the_receipt_id(braid):
    index = Recall(braid)
    hits = index.recall("what coffee does she drink", 3, record=True, run="r", turn="t1",
                        context_bytes=b"system: ...\nmemory: coffee black")
    assert hits.context_id is not None and len(hits) == 3
    r = read_receipt(braid, hits.context_id).receipt
    assert [(i.seq, i.delta_id, i.rank, i.role) for i in r.items] == \
        [(h.seq, h.delta_id, n, "retrieved") for n, h in enumerate(hits, 1)]
    assert [i.score for i in r.items] == [h.score for h in hits]
    req = r.request
    assert req.query == "what coffee does she drink" and req.mode == "vector" and req.k == 3
    assert req.as_of == 6 and req.embedder.name == "hashing-v1-512" and req.embedder.dim == 512
    assert req.query_sha256 == sha256_hex("what coffee does she drink")
    assert braid.head().seq == hits.context_seq == 7
    plain = index.recall("coffee", 2)
    assert plain.context_id is None and braid.head().seq == 7  # nothing recorded unless asked
    hashed = index.recall("coffee", 2, record=True, run="r", turn="t2", hash_query=True,
                          mode="hybrid", braid="alice", as_of=5)
    req = read_receipt(braid, hashed.context_id).receipt.request
    assert req.query is None and req.query_sha256 == sha256_hex("coffee")
    assert (req.mode, req.as_of, req.filters) == ("hybrid", 5, {"braid": ["alice"]})
    index.close()


def test_a_plain_store_records_too(store_path):
    with LmdbLog(store_path) as log:
        index = Recall(log, directory=False)
        hits = index.recall("dog", 1, record=True, run="r", turn="1")
        assert log.read(hits.context_seq).delta.kind == CONTEXT_USED
        index.close()


def _item(log, seq, **kw):
    return {"seq": seq, "delta_id": log.read(seq).delta.id, "rank": 1, **kw}


@pytest.mark.parametrize("case, field", [
    ("beyond the head", "payload.items[0].seq"),
    ("unknown id", "payload.items[0].delta_id"),
    ("id at another seq", "payload.items[0].seq"),
    ("a later delta of the batch", "payload.items[0].seq"),
    ("as_of after the receipt", "payload.request.as_of"),
])
def test_the_log_refuses_a_receipt_citing_what_is_not_before_it(braid, case, field):
    log = braid.log
    memory = braidlog.delta("alice", "message", {"text": "new"})
    items = {"beyond the head": [{**_item(log, 1), "seq": 99}],
             "unknown id": [{**_item(log, 1), "delta_id": braidlog.new_id()}],
             "id at another seq": [{**_item(log, 1), "seq": 2}],
             "a later delta of the batch": [{"seq": 8, "delta_id": memory.id, "rank": 1}],
             "as_of after the receipt": [_item(log, 1)]}[case]
    payload = {"run": "r", "turn": "t", "items": items}
    if case == "as_of after the receipt":
        payload["request"] = {"mode": "vector", "k": 1, "as_of": 7, "query_sha256": sha256_hex("x")}
    receipt = braidlog.delta("context", CONTEXT_USED, payload)
    for target in (braid, log):  # through the boundary and straight to the store
        with pytest.raises(ValidationError) as e:
            target.append_batch([receipt, memory])
        assert e.value.field == field, e.value
        assert braid.head().seq == 6
    with pytest.raises(ValidationError):
        braid.record_context([99], run="r", turn="t")
    assert braid.head().seq == 6


def test_a_receipt_may_cite_an_earlier_delta_of_its_batch(braid):
    memory = braidlog.delta("alice", "message", {"text": "new"})
    receipt = braidlog.delta("context", CONTEXT_USED, {"run": "r", "turn": "t", "items": [
        {"seq": 7, "delta_id": memory.id, "rank": 1, "role": "injected"}]})
    assert braid.append_batch([memory, receipt]) == [7, 8]


@pytest.mark.parametrize("item, field", [
    ({"role": "seen"}, "payload.items[0].role"),
    ({"rank": 0}, "payload.items[0].rank"),
    ({"score": float("nan")}, "payload.items[0]"),
    ({"seq": 0}, "payload.items[0].seq"),
    ({"delta_id": "not-a-ulid"}, "payload.items[0].delta_id"),
    ({"extra": 1}, "payload.items[0]"),
])
def test_bad_items_are_refused_by_their_schema(braid, item, field):
    payload = {"run": "r", "turn": "t", "items": [{**_item(braid.log, 1), **item}]}
    with pytest.raises(ValidationError) as e:
        braid.append(braidlog.delta("context", CONTEXT_USED, payload))
    assert e.value.field.startswith(field), e.value
    assert braid.head().seq == 6


def test_ranks_duplicates_digests_and_query_hashes_are_checked(braid):
    log = braid.log
    cases = [
        [_item(log, 1), _item(log, 2)],  # two retrieved at rank 1
        [_item(log, 1), _item(log, 1, rank=2)],  # the same seq twice in one role
    ]
    for items in cases:
        with pytest.raises(ValidationError, match="rank|second time"):
            braid.append(braidlog.delta("context", CONTEXT_USED, {"run": "r", "turn": "t", "items": items}))
    for extra, rule in [({"context_sha256": "ab" * 32}, "come together"),
                        ({"context_sha256": "AB" * 32, "context_size": 1}, "regex"),
                        ({"request": {"mode": "vector", "k": 1, "as_of": 1, "query": "x",
                                      "query_sha256": sha256_hex("y")}}, "SHA-256 of the query")]:
        with pytest.raises(ValidationError, match=rule):
            braid.append(braidlog.delta("context", CONTEXT_USED,
                                        {"run": "r", "turn": "t", "items": [], **extra}))
    with pytest.raises(ValidationError, match="run"):
        braid.record_context([1], run="", turn="t")
    with pytest.raises(ValidationError, match="context_bytes"):
        braid.record_context([1], run="r", turn="t", context_bytes=123)
    with pytest.raises(ValidationError, match="run"):
        Recall(braid).recall("coffee", 1, record=True)
    assert braid.head().seq == 6


def test_the_same_seq_may_be_retrieved_and_injected(braid):
    rid = braid.record_context([{"seq": 1, "role": "retrieved", "score": 0.9}, 1], run="r", turn="t")
    assert [i.role for i in read_receipt(braid, rid).receipt.items] == ["retrieved", "injected"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=st.lists(st.one_of(
    st.integers(-3, 12), st.text(max_size=30), st.none(), st.floats(allow_nan=True),
    st.dictionaries(st.sampled_from(["seq", "delta_id", "rank", "score", "role", "x"]),
                    st.one_of(st.integers(-2, 10), st.text(max_size=5), st.floats(), st.none()))),
    max_size=4),
    run=st.one_of(st.text(max_size=130), st.integers(), st.none()))
def test_any_input_gets_a_typed_error_or_a_receipt(braid, items, run):
    head = braid.head().seq
    try:
        rid = braid.record_context(items, run=run, turn="t")
    except BraidlogError:
        assert braid.head().seq == head
        return
    assert read_receipt(braid, rid).delta.id == rid


def test_read_receipt_refuses_what_is_not_one(braid):
    for ref, rule in [(braidlog.new_id(), "no delta"), (1, "not a context receipt"),
                      (99, "no record at seq 99"), (None, "must be a delta id")]:
        with pytest.raises(ValidationError, match=rule):
            read_receipt(braid, ref)


def test_replay_says_same_or_different_or_why_not(braid):
    index = Recall(braid)
    hits = index.recall("peanut allergy", 3, record=True, run="r", turn="1")
    index.close()
    braid.append(braidlog.recall.embed_delta(braidlog.delta("alice", "message",
                                                            {"text": "peanut allergy is severe"})))
    same = replay(braid, hits.context_id)
    assert same.same is True and same.found == same.recorded and same.as_of == 6
    # a receipt whose items are real records but not what its request finds
    request = RecallRequest(mode="vector", k=2, as_of=6, query="jazz", query_sha256=sha256_hex("jazz"),
                            embedder=read_receipt(braid, hits.context_id).receipt.request.embedder)
    from braidlog.receipts.record import build_receipt, items_of, write_receipt
    fake = build_receipt(items_of(braid, [1, 2], role="retrieved"), run="r", turn="2", request=request)
    rid, _ = write_receipt(braid, fake)
    other = replay(braid, rid)
    assert other.same is False and other.recorded == [(1, braid.log.read(1).delta.id),
                                                      (2, braid.log.read(2).delta.id)]
    assert "different" in other.summary()
    alien = msgspec.structs.replace(request, embedder=braidlog.receipts.EmbedderRef(
        name="sentence-transformers:all-MiniLM-L6-v2", dim=384))
    rid, _ = write_receipt(braid, build_receipt([], run="r", turn="3", request=alien))
    cannot = replay(braid, rid)
    assert cannot.same is None and "cannot be loaded" in cannot.reason
    with pytest.raises(ValidationError, match="nothing to replay"):
        replay(braid, braid.record_context([1], run="r", turn="4"))


def test_the_schema_is_the_kinds(braid):
    assert braidlog.REGISTRY[CONTEXT_USED].schema is ContextUsed
