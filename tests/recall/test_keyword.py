"""Keyword (BM25, tantivy) and hybrid recall: exact as of any point, filters before the top k,
a derived index rebuilt when stale or damaged, and hybrid as reciprocal-rank fusion."""

from __future__ import annotations

import random
import shutil
import warnings
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import braidlog
from braidlog import LmdbLog, MemoryLog, ValidationError
from braidlog.recall import RRF_K, KeywordIndex, Recall, RecallWarning, embed_delta, fuse
from tests.support import T0

WORDS = ("database", "timeout", "lmdb", "index", "replica", "checkpoint", "deploy", "rollback",
         "ERR-4012", "ticket-7781", "cache", "schema", "latency", "merge", "queue", "vector")
NOTE = "recall_keyword_note"
if NOTE not in braidlog.REGISTRY:  # a kind whose text is one declared field, nested
    braidlog.declare(NOTE, None, owner="tests.test_recall_keyword", text=("body.summary",))
MSG = "recall_keyword_msg"  # an open kind (any JSON object) whose text is found by the common fields
if MSG not in braidlog.REGISTRY:
    braidlog.declare(MSG, None, owner="tests.test_recall_keyword")


def corpus(n: int, seed: int = 7) -> list[braidlog.GenericDelta]:
    """n messages of 4-9 words from WORDS, over braids b0..b2, some tagged, every one embedded."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        text = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(4, 9)))
        d = braidlog.delta(f"b{i % 3}", MSG, {"text": text, "namespace": "ops" if i % 4 == 0 else "dev"},
                           ts=T0 + timedelta(seconds=i), tags=("incident",) if i % 5 == 0 else ())
        out.append(embed_delta(d))
    return out


def words_of(d: braidlog.GenericDelta) -> set[str]:
    return set(d.payload["text"].lower().replace("-", " ").split())


@pytest.fixture
def store(tmp_path):
    log = LmdbLog(tmp_path / "store", durable=False)
    ds = corpus(300)
    log.append_batch(ds)
    yield log, ds
    log.close()


def eligible(ds, seq, query_words, braid=None, tags=None, namespace=None):
    """The seqs (1-based) of deltas up to ``seq`` the filters admit that hold a query word."""
    out = set()
    for i, d in enumerate(ds[:seq]):
        if braid and d.braid_id != braid or tags and tags not in d.tags \
                or namespace and d.payload["namespace"] != namespace:
            continue
        if words_of(d) & query_words:
            out.add(i + 1)
    return out


@pytest.mark.parametrize("filters", [{}, {"braid": "b1"}, {"tags": "incident"}, {"namespace": "ops"},
                                     {"braid": "b2", "tags": "incident"}], ids=repr)
def test_keyword_as_of_with_filters_returns_only_and_all_of_the_eligible(store, filters):
    log, ds = store
    r = Recall(log)
    query = "rollback ERR-4012"
    qw = {"rollback", "err", "4012"}
    for seq in (17, 90, 211, 300):
        hits = r.recall(query, 10, mode="keyword", as_of=seq, **filters)
        want = eligible(ds, seq, qw, **filters)
        assert {h.seq for h in hits} <= want  # nothing later, nothing filtered out, nothing without a word
        assert len(hits) == min(10, len(want))  # filters applied before the top 10 was cut
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
        if len(want) <= 10:
            assert {h.seq for h in hits} == want


def test_keyword_ranks_an_exact_identifier_first(tmp_path):
    log = MemoryLog()
    texts = ["the build broke with a timeout", "a timeout in the database layer again",
             "ticket 7781: the deploy failed with ERR-4012", "lunch is at noon"]
    log.append_batch([embed_delta(braidlog.delta("s", "message", {"text": t}, ts=T0 + timedelta(seconds=i)))
                      for i, t in enumerate(texts)])
    r = Recall(log)
    assert r.recall("ERR-4012", 1, mode="keyword")[0].seq == 3
    assert r.recall("ERR-4012", 1, mode="hybrid")[0].seq == 3
    assert r.recall("ERR-4012", 1, mode="keyword", as_of=2) == []  # it did not exist yet
    assert r.recall("noon", 5, mode="keyword", as_of=4)[0].seq == 4


def test_keyword_as_of_is_the_same_on_an_index_built_from_the_prefix(tmp_path, store):
    """The eligible set as of seq k, and (where the statistics agree) the ranking, are those of an
    index built from deltas 1..k alone."""
    log, ds = store
    r = Recall(log)
    prefix = LmdbLog(tmp_path / "prefix", durable=False)
    prefix.append_batch(ds[:120])
    p = Recall(prefix)
    for query in ("cache latency", "ticket-7781 schema"):
        full = r.recall(query, 400, mode="keyword", as_of=120, deltas=False)
        alone = p.recall(query, 400, mode="keyword", deltas=False)
        assert {h.seq for h in full} == {h.seq for h in alone}
    prefix.close()


def test_hybrid_is_the_reciprocal_rank_fusion_of_both_rankings(store):
    log, ds = store
    r = Recall(log)
    for as_of, filters in ((None, {}), (150, {"braid": "b0"}), (260, {"tags": "incident"})):
        k = 7
        depth = 2 * k + 10
        vec = r.recall("database timeout", depth, mode="vector", as_of=as_of, deltas=False, **filters)
        kw = r.recall("database timeout", depth, mode="keyword", as_of=as_of, deltas=False, **filters)
        want = fuse([[(h.seq, h.delta_id) for h in vec], [(h.seq, h.delta_id) for h in kw]], k)
        got = r.recall("database timeout", k, mode="hybrid", as_of=as_of, deltas=False, **filters)
        assert [(h.seq, h.delta_id) for h in got] == [(s, i) for s, i, _ in want]
        assert [h.score for h in got] == pytest.approx([s for *_, s in want])
        assert got[0].score <= 2 / (RRF_K + 1) + 1e-12  # at best first in both rankings


def test_fuse_by_hand():
    a = [(1, "a"), (2, "b"), (3, "c")]
    b = [(3, "c"), (4, "d")]
    got = fuse([a, b], 3, c=60)
    assert got[0][:2] == (3, "c") and got[0][2] == pytest.approx(1 / 63 + 1 / 61)
    assert [g[0] for g in got] == [3, 1, 2]  # seqs 2 and 4 tie at 1/62: the lower seq first
    assert fuse([], 5) == []


def test_keyword_uses_the_text_fields_a_kind_declares():
    log = MemoryLog()
    log.append_batch([
        braidlog.delta("s", NOTE, {"body": {"summary": "the replica lagged"}, "title": "zebra"}, ts=T0),
        braidlog.delta("s", "message", {"text": "zebra crossing"}, ts=T0 + timedelta(seconds=1)),
    ])
    k = KeywordIndex(log)
    assert [s for s, _, _ in k.search("replica", 5)] == [1]
    assert [s for s, _, _ in k.search("zebra", 5)] == [2]  # the note's title is not its text


def test_keyword_index_persists_catches_up_and_rebuilds_when_damaged(tmp_path):
    log = LmdbLog(tmp_path / "store", durable=False)
    ds = corpus(120, seed=3)
    log.append_batch(ds[:100])
    d = tmp_path / "store" / "recall" / "keyword.bm25"
    k = KeywordIndex(log)
    before = k.search("checkpoint merge", 10)
    before_all = k.search("checkpoint merge", 200)
    assert k.covered_seq == 100 and (d / "meta.msgpack").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a sound index opens without a notice
        again = KeywordIndex(log)
    assert again.search("checkpoint merge", 10) == before and again.notices == []
    log.append_batch(ds[100:])
    # As of seq 100 the same deltas are eligible; their BM25 weights now count deltas 101..120.
    assert {s for s, *_ in again.search("checkpoint merge", 200, as_of=100)} == \
        {s for s, *_ in k.search("checkpoint merge", 200, as_of=100)} == {s for s, *_ in before_all}
    assert again.covered_seq == 120
    now = again.search("checkpoint merge", 10, as_of=100)
    del k, again

    victim = max((p for p in (d / "index").iterdir() if p.is_file() and not p.name.endswith(".lock")),
                 key=lambda p: p.stat().st_size)
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    with pytest.warns(RecallWarning, match=rf"keyword index at .* ignored: {victim.name} is damaged"):
        fixed = KeywordIndex(log)
    assert fixed.search("checkpoint merge", 10, as_of=100) == now  # rebuilt: the same answers
    log.close()


def test_keyword_index_of_another_log_or_ahead_of_the_log_is_not_trusted(tmp_path):
    ds = corpus(60, seed=4)
    a = LmdbLog(tmp_path / "a", durable=False)
    a.append_batch(ds)
    KeywordIndex(a)
    b = LmdbLog(tmp_path / "b", durable=False)
    b.append_batch(corpus(60, seed=5))
    shutil.copytree(tmp_path / "a" / "recall", tmp_path / "b" / "recall")
    with pytest.warns(RecallWarning, match="chain hash at seq 60 is not the log's"):
        KeywordIndex(b)
    c = LmdbLog(tmp_path / "c", durable=False)
    c.append_batch(ds[:30])
    shutil.copytree(tmp_path / "a" / "recall", tmp_path / "c" / "recall")
    with pytest.warns(RecallWarning, match="covers seq 60 but the log ends at 30"):
        k = KeywordIndex(c)
    assert k.covered_seq == 30 and all(s <= 30 for s, _, _ in k.search("database", 50))
    for log in (a, b, c):
        log.close()


def test_keyword_rebuild_gives_the_same_answers(store):
    log, _ = store
    r = Recall(log)
    before = r.recall("schema queue", 10, mode="keyword", as_of=200, deltas=False)
    assert r.keyword().rebuild() == 300
    assert r.recall("schema queue", 10, mode="keyword", as_of=200, deltas=False) == before


def test_keyword_and_hybrid_refuse_bad_input(store):
    log, _ = store
    r = Recall(log)
    with pytest.raises(ValidationError, match="mode: must be one of vector, keyword, hybrid, not 'bm25'"):
        r.recall("x", mode="bm25")
    with pytest.raises(ValidationError, match="query: must be a text in keyword mode"):
        r.recall([0.1] * 512, mode="keyword")
    with pytest.raises(ValidationError, match="has no words to search for"):
        r.recall("--- !!", mode="keyword")
    with pytest.raises(ValidationError, match="as_of: seq 999 is outside the log"):
        r.recall("cache", mode="hybrid", as_of=999)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(max_size=60), k=st.integers(-2, 40), as_of=st.one_of(st.none(), st.integers(-5, 400)),
       mode=st.sampled_from(["keyword", "hybrid"]), braid=st.one_of(st.none(), st.text(max_size=5)))
def test_arbitrary_keyword_queries_raise_only_braidlog_errors(store, query, k, as_of, mode, braid):
    log, _ = store
    r = Recall(log)
    try:
        hits = r.recall(query, k, mode=mode, as_of=as_of, braid=braid)
    except braidlog.BraidlogError:
        return
    assert len(hits) <= k and all(as_of is None or h.seq <= as_of for h in hits)
