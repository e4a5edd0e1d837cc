"""Recall: vectors in the log, the derived HNSW index, as-of equality, filters before top-k."""

from __future__ import annotations

import json
import shutil
import sys
import threading
import warnings
from datetime import timedelta

import numpy as np
import pytest

import braidlog
from braidlog import LmdbLog, MemoryLog, ValidationError, Vector
from braidlog.recall import (
    DEFAULT_DIM,
    HashingEmbedder,
    Hit,
    Recall,
    RecallWarning,
    close_for,
    delta_text,
    embed_delta,
    recall_at,
    recall_for,
)
from tests.support import T0, make_delta
from tests.support.recall import DIM, NOTE, SMALL, deltas, vectors


def exact(x: np.ndarray, seqs: list[int], q: np.ndarray, k: int, keep=None) -> list[int]:
    """The true top k seqs by cosine (the reference the index is measured against)."""
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    s = xn @ (q / np.linalg.norm(q))
    order = [i for i in np.argsort(-s, kind="stable") if keep is None or keep(i)]
    return [seqs[i] for i in order[:k]]


@pytest.fixture
def filled(tmp_path):
    """An LMDB store of 1,200 vectored deltas (plus 120 without), and the vectors and their seqs."""
    x = vectors(1200)
    store = LmdbLog(tmp_path / "store", durable=False)
    ds = deltas(x)
    store.append_batch(ds)
    seqs = [store.seq_of(d.id) for d in ds if d.vector is not None]
    yield store, x, seqs, ds
    store.close()


# -- item 1: vectors in the log ------------------------------------------------------------------

@pytest.mark.parametrize("bad, rule", [
    (np.ones(DIM + 1), "has dimension 16, this vector has 17"),
    (np.array([1.0] * (DIM - 1) + [np.nan]), "must be finite: element 15 is nan"),
    (np.array([np.inf] + [1.0] * (DIM - 1)), "must be finite: element 0 is inf"),
])
def test_bad_vector_is_refused_and_nothing_written(tmp_path, bad, rule):
    store = LmdbLog(tmp_path / "store")
    store.append(make_delta(0, kind="observation", payload={}, vector=Vector.of(np.ones(DIM))))
    head = store.head()
    good = make_delta(1, kind="observation", payload={}, vector=Vector.of(np.ones(DIM)))
    bad_delta = make_delta(2, kind="observation", payload={}, vector=Vector(np.asarray(bad, "<f4").tobytes()))
    with pytest.raises(ValidationError) as e:
        store.append_batch([good, bad_delta])
    assert e.value.field == "vector.data" and rule.split(":")[0] in e.value.rule
    assert rule in str(e.value)
    assert store.head() == head and store.get(good.id) is None
    store.close()


def test_empty_or_ragged_vector_bytes_are_refused(log):
    for data in (b"", b"\x00\x00\x00"):
        with pytest.raises(ValidationError, match="vector.data: must be float32 bytes"):
            log.append(make_delta(0, kind="observation", payload={}, vector=Vector(data)))
    assert log.head().seq == 0


def test_dimension_is_per_space(log):
    log.append(make_delta(0, kind="observation", payload={}, vector=Vector.of(np.ones(4), "small")))
    log.append(make_delta(1, kind="observation", payload={}, vector=Vector.of(np.ones(8), "big")))
    with pytest.raises(ValidationError, match="vector space 'small' has dimension 4"):
        log.append(make_delta(2, kind="observation", payload={}, vector=Vector.of(np.ones(8), "small")))
    assert log.head().seq == 2


def test_vector_is_covered_by_the_chain(tmp_path):
    a, b = LmdbLog(tmp_path / "a"), LmdbLog(tmp_path / "b")
    d = make_delta(0, kind="observation", payload={}, vector=Vector.of(np.ones(DIM)))
    a.append(d)
    b.append(braidlog.GenericDelta(**{**{f: getattr(d, f) for f in d.__struct_fields__},
                                      "vector": Vector.of(np.ones(DIM) * 2)}))
    assert a.head().hash != b.head().hash
    a.close(), b.close()


# -- item 2: the index is derived ----------------------------------------------------------------

def test_recall_finds_the_nearest_vectors(filled):
    store, x, seqs, _ = filled
    r = Recall(store, **SMALL)
    assert len(r) == 1200 and r.covered_seq == store.head().seq
    rng = np.random.default_rng(5)
    hits = total = 0
    for i in rng.integers(0, 1200, 30):
        q = x[i] + 0.05 * rng.normal(size=DIM).astype(np.float32)
        got, scores = r.search(q, 10)
        assert list(scores) == sorted(scores, reverse=True)
        hits += len(set(got.tolist()) & set(exact(x, seqs, q, 10)))
        total += 10
    assert hits / total >= 0.95
    top = r.recall(x[7], 3)
    assert isinstance(top[0], Hit) and top[0].seq == seqs[7] and top[0].delta.id == top[0].delta_id
    assert top[0].score == pytest.approx(1.0, abs=1e-5)


def test_index_persists_and_catches_up_on_open(filled):
    store, x, seqs, _ = filled
    r = Recall(store, **SMALL)
    r.seal()
    before = r.search(x[3], 10, as_of=seqs[700], reproducible=True)
    r.close()
    more = vectors(100, seed=9)
    store.append_batch(deltas(more, start=5000))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecallWarning)  # loaded as saved: nothing ignored
        again = Recall(store, **SMALL)
    assert again.notices == []
    assert again.covered_seq == store.head().seq and len(again) == 1300
    assert np.array_equal(again.search(x[3], 10, as_of=seqs[700], reproducible=True)[0], before[0])
    got, _ = again.search(more[42], 1)
    assert store.read(int(got[0])).delta.payload["data"]["i"] == 5042


def test_catch_up_after_appends(log):
    r = Recall(log, **SMALL)
    assert r.recall(np.ones(DIM), 5) == []
    x = vectors(200)
    log.append_batch(deltas(x[:100]))
    assert len(r.recall(x[0], 5)) == 5
    log.append_batch(deltas(x[100:], start=100))
    got = r.recall(x[150], 1)
    assert got[0].delta.payload["data"]["i"] == 150 and len(r) == 200


def test_damaged_index_file_is_rebuilt(filled):
    store, x, seqs, _ = filled
    r = Recall(store, **SMALL)
    want = r.search(x[11], 10)
    r.close()
    vec_file = next(r.directory.glob("vectors-*.f32"))
    data = bytearray(vec_file.read_bytes())
    data[100] ^= 0xFF
    vec_file.write_bytes(bytes(data))
    with pytest.warns(RecallWarning, match=r"vectors-.*\.f32 is damaged \(digest mismatch\); rebuilding"):
        again = Recall(store, **SMALL)
    assert np.array_equal(again.search(x[11], 10)[0], want[0])


def test_damaged_block_is_rebuilt_alone(filled):
    store, x, seqs, _ = filled
    r = Recall(store, **SMALL)
    r.seal()
    want = r.search(x[11], 10, as_of=seqs[1000], reproducible=True)
    r.close()
    block = r.directory / "L3-0.hnsw"
    data = bytearray(block.read_bytes())
    data[-50] ^= 0xFF
    block.write_bytes(bytes(data))
    again = Recall(store, **SMALL)
    with pytest.warns(RecallWarning, match="L3-0.hnsw is damaged"):
        got = again.search(x[11], 10, as_of=seqs[1000], reproducible=True)
    assert np.array_equal(got[0], want[0])


def test_stale_index_from_another_log_is_not_trusted(tmp_path):
    x = vectors(300)
    a = LmdbLog(tmp_path / "a", durable=False)
    a.append_batch(deltas(x))
    Recall(a, **SMALL).close()
    b = LmdbLog(tmp_path / "b", durable=False)
    b.append_batch(deltas(x[::-1]))  # other deltas, same count
    shutil.copytree(tmp_path / "a" / "recall", tmp_path / "b" / "recall")
    with pytest.warns(RecallWarning, match="chain hash at seq 330 is not the log's"):
        r = Recall(b, **SMALL)
    got, _ = r.search(x[0], 1)
    assert b.read(int(got[0])).delta.vector.data == Vector.of(x[0]).data
    a.close(), b.close()


def test_index_ahead_of_the_log_is_stale(tmp_path):
    x = vectors(100)
    a = LmdbLog(tmp_path / "a", durable=False)
    a.append_batch(deltas(x))
    Recall(a, **SMALL).close()
    b = LmdbLog(tmp_path / "b", durable=False)
    b.append_batch(deltas(x[:50]))
    shutil.copytree(tmp_path / "a" / "recall", tmp_path / "b" / "recall")
    with pytest.warns(RecallWarning, match="covers seq 110 but the log ends at 55"):
        r = Recall(b, **SMALL)
    assert len(r) == 50
    a.close(), b.close()


def test_rebuild_reports_progress(filled):
    store, *_ = filled
    r = Recall(store, **SMALL)
    seen: list[int] = []
    assert r.rebuild(progress=seen.append, blocks=True) == store.head().seq
    assert seen and seen[-1] == store.head().seq and seen == sorted(seen)
    assert set(r.sealed()) <= set(r._blocks.graphs)


def test_memory_store_keeps_the_index_in_memory():
    log = MemoryLog()
    log.append_batch(deltas(vectors(50)))
    r = Recall(log, **SMALL)
    assert r.directory is None and r.save() is False and len(r) == 50
    with pytest.raises(ValidationError, match="lives in memory"):
        Recall(log, directory=True)


# -- item 3: as of any point -------------------------------------------------------------------

LOSSY = dict(block=64, fanout=2, ef=10, ef_construction=10, M=4)  # approximate enough to tell graphs apart


@pytest.mark.parametrize("exact_max", [2048, 0], ids=["filters-exact", "filters-overfetch"])
def test_as_of_equals_an_index_built_from_the_prefix(tmp_path, filled, exact_max):
    store, x, seqs, ds = filled
    full = Recall(store, exact_max=exact_max, exact_ratio=0.0, **LOSSY)
    rng = np.random.default_rng(3)
    queries = [x[i] + 0.3 * rng.normal(size=DIM).astype(np.float32) for i in rng.integers(0, 1200, 12)]
    inexact = 0
    for n, k_seq in enumerate([seqs[63], seqs[64], seqs[200], seqs[777], seqs[1023], store.head().seq - 1]):
        prefix = LmdbLog(tmp_path / f"prefix{n}", durable=False)
        prefix.append_batch(ds[:k_seq])
        assert prefix.head().seq == k_seq  # its own salts: its hashes are its own
        fresh = Recall(prefix, exact_max=exact_max, exact_ratio=0.0, **LOSSY)
        m = seqs.index(k_seq) + 1 if k_seq in seqs else sum(s <= k_seq for s in seqs)
        for q in queries:
            for filters in ({}, {"braid": "b1"}, {"tags": "odd", "kinds": "observation"}):
                a = full.search(q, 10, as_of=k_seq, reproducible=True, **filters)
                b = fresh.search(q, 10, as_of=k_seq, reproducible=True, **filters)
                assert np.array_equal(a[0], b[0]), (k_seq, filters)
                np.testing.assert_allclose(a[1], b[1], rtol=0, atol=1e-6)
                assert (a[0] <= k_seq).all()
            inexact += list(full.search(q, 10, as_of=k_seq, reproducible=True)[0]) != exact(x[:m], seqs[:m], q, 10)
        prefix.close()
    assert inexact > 0  # the graphs are approximate here, so equality comes from sharing them


def test_as_of_equals_after_incremental_catch_up(tmp_path, filled):
    store, x, seqs, ds = filled
    full = Recall(store, directory=tmp_path / "full", **LOSSY)
    grown = LmdbLog(tmp_path / "grown", durable=False)
    r = Recall(grown, **LOSSY)
    for lo in range(0, len(ds), 97):
        grown.append_batch(ds[lo:lo + 97])
        r.catch_up()
    q = x[500]
    for k_seq in (seqs[100], seqs[640], seqs[1100]):
        assert np.array_equal(full.search(q, 10, as_of=k_seq, reproducible=True)[0],
                              r.search(q, 10, as_of=k_seq, reproducible=True)[0])
    grown.close()


def test_as_of_sees_only_the_past(filled):
    store, x, seqs, _ = filled
    r = Recall(store, **SMALL)
    k_seq = seqs[500]
    got, _ = r.search(x[900], 10, as_of=k_seq)
    assert (got <= k_seq).all()
    assert list(got) == exact(x[:501], seqs[:501], x[900], 10)[:10] or len(set(got) & set(
        exact(x[:501], seqs[:501], x[900], 10))) >= 9
    when = store.read(k_seq).delta.ts
    by_time = r.search(x[900], 10, as_of=when)
    by_id = r.search(x[900], 10, as_of=store.read(k_seq).delta.id)
    assert np.array_equal(by_time[0], got) and np.array_equal(by_id[0], got)
    assert len(r.search(x[0], 5, as_of=0)[0]) == 0


def test_default_as_of_searches_the_head_graph_within_the_prefix(filled):
    """Without reproducible, an as-of query searches the head graph over-fetched, its later
    positions ineligible: k hits whenever k exist, none past the point, no block built, and the
    answer of exact search on this easy data; a small prefix is searched exactly."""
    store, x, seqs, _ = filled
    r = Recall(store, **SMALL)
    rng = np.random.default_rng(5)
    agree = total = 0
    for i in rng.integers(0, 1200, 40):
        k_seq = seqs[int(rng.integers(300, 1200))]
        m = seqs.index(k_seq) + 1
        got, scores = r.search(x[i], 10, as_of=k_seq)
        assert len(got) == 10 and (got <= k_seq).all() and list(scores) == sorted(scores, reverse=True)
        truth = exact(x[:m], seqs[:m], x[i], 10)
        agree += len(set(got.tolist()) & set(truth))
        total += 10
    assert agree / total >= 0.95
    assert r.memory()["as-of blocks"] == 0
    few = seqs[20]  # 21 vectors: below exact_max, searched exactly
    assert list(r.search(x[3], 5, as_of=few)[0]) == exact(x[:21], seqs[:21], x[3], 5)
    assert list(r.search(x[3], 50, as_of=few)[0]) == exact(x[:21], seqs[:21], x[3], 50)  # all 21


def test_as_of_outside_the_log_is_refused(filled):
    store, x, *_ = filled
    r = Recall(store, **SMALL)
    with pytest.raises(ValidationError, match=r"as_of: seq 99999 is outside the log"):
        r.search(x[0], as_of=99_999)
    with pytest.raises(ValidationError, match="as_of: no delta with id"):
        r.search(x[0], as_of="01ARZ3NDEKTSV4RRFFQ69G5FAV")


# -- item 4: filtered before top-k ---------------------------------------------------------------

@pytest.fixture
def crowded(tmp_path):
    """1,000 vectors near +e0 in braid "crowd", and 15 far ones (near -e0) in braid "rare"."""
    rng = np.random.default_rng(2)
    store = LmdbLog(tmp_path / "store", durable=False)
    near = np.eye(DIM, dtype=np.float32)[0] + 0.2 * rng.normal(size=(1000, DIM)).astype(np.float32)
    far = -np.eye(DIM, dtype=np.float32)[0] + 0.2 * rng.normal(size=(15, DIM)).astype(np.float32)
    ds = [make_delta(i, braid="crowd", kind=NOTE, payload={"namespace": "team-a"},
                     vector=Vector.of(v)) for i, v in enumerate(near)]
    ds += [make_delta(2000 + i, braid="rare", kind=NOTE,
                      payload={"namespace": "team-b", "workspace": "lab"},
                      tags=("keep",) if i % 2 else (), vector=Vector.of(v)) for i, v in enumerate(far)]
    store.append_batch(ds)
    yield store, ds
    store.close()


@pytest.mark.parametrize("exact_max", [0, 2048], ids=["graph-overfetch", "exact"])
@pytest.mark.parametrize("as_of", [None, "head"], ids=["head", "as-of"])
def test_filter_applies_before_top_k(crowded, exact_max, as_of):
    store, ds = crowded
    r = Recall(store, exact_max=exact_max, exact_ratio=0.0, **SMALL)
    q = np.eye(DIM, dtype=np.float32)[0]
    at = store.head().seq if as_of else None
    rare = {d.id for d in ds if d.braid_id == "rare"}
    for filters in ({"braid": "rare"}, {"namespace": "team-b"}, {"workspace": "lab"}, {"where": rare},
                    {"where": lambda i: i in rare}):
        hits = r.recall(q, 10, as_of=at, **filters)
        assert len(hits) == 10, filters
        assert all(h.delta.braid_id == "rare" for h in hits)
    keep = r.recall(q, 10, as_of=at, tags="keep")
    assert len(keep) == 7 and all("keep" in h.delta.tags for h in keep)  # only 7 exist
    assert r.recall(q, 10, as_of=at, braid="nobody") == []
    assert len(r.recall(q, 10, as_of=at, namespace="default")) == 0
    assert len(r.recall(q, 10, as_of=at, braid=["rare", "crowd"])) == 10


def test_filtered_results_are_the_true_top_k_of_the_eligible(filled):
    store, x, seqs, ds = filled
    r = Recall(store, exact_max=0, exact_ratio=0.0, **SMALL)
    vec = [d for d in ds if d.vector is not None]
    q = x[10]
    for filters, keep in (({"braid": "b2"}, lambda i: vec[i].braid_id == "b2"),
                          ({"tags": "odd", "braid": ["b1", "b3"]},
                           lambda i: "odd" in vec[i].tags and vec[i].braid_id in ("b1", "b3"))):
        for at in (None, seqs[900]):
            m = 1200 if at is None else 901
            got, _ = r.search(q, 10, as_of=at, **filters)
            want = exact(x[:m], seqs[:m], q, 10, keep)
            assert len(got) == 10 and len(set(got.tolist()) & set(want)) >= 9


def test_predicate_from_projection_state(tmp_path):
    """``where`` takes the ids a projection's state admits (here: messages not yet retracted)."""
    braid = braidlog.open(tmp_path / "store", projections=[])
    e = HashingEmbedder()
    texts = ["the database is PostgreSQL", "the database is SQLite", "the database is LMDB",
             "lunch is at noon"]
    ds = [embed_delta(braidlog.delta("s", "message", {"text": t}, ts=T0 + timedelta(seconds=i)), e)
          for i, t in enumerate(texts)]
    braid.append_batch(ds)
    retracted = {ds[2].id}
    live = {d.id for d in ds} - retracted
    top = braid_recall(braid, "which database", 1, where=live)
    assert top[0].delta_id != ds[2].id and "database" in top[0].delta.payload["text"]
    close_for(braid)
    braid.close()


def braid_recall(braid, text, k, **kw):
    return recall_for(braid).recall(text, k, **kw)


def test_bad_filters_and_queries_are_refused(filled):
    store, x, *_ = filled
    r = Recall(store, **SMALL)
    with pytest.raises(ValidationError, match="k: must be an int of at least 1"):
        r.search(x[0], 0)
    with pytest.raises(ValidationError, match="braid: must be a string or an iterable"):
        r.search(x[0], braid=3)
    with pytest.raises(ValidationError, match="query: has dimension 3; space 'default' holds 16"):
        r.search([1.0, 2.0, 3.0])
    with pytest.raises(ValidationError, match="query: must be finite"):
        r.search(np.full(DIM, np.nan))
    with pytest.raises(ValidationError, match="zero vector"):
        r.search(np.zeros(DIM))
    with pytest.raises(ValidationError, match="embedder: hashing-v1-512 makes 512-dimensional vectors"):
        r.recall("some text")
    with pytest.raises(ValidationError, match="metric: must be one of cosine, ip"):
        Recall(store, metric="l2")
    with pytest.raises(ValidationError, match="for a view .* use recall_at"):
        Recall(braidlog.Braid(store).at(1))


@pytest.mark.parametrize("metric", ["cosine", "ip"])
def test_a_float32_query_answers_as_any_other_form_of_it(filled, metric):
    """A float32 vector of the space (the common query, answered with the fewest steps) gets the
    same seqs and scores, bit for bit, as the same numbers given as a list or as float64; and
    the zero or non-finite vector is refused the same way."""
    store, x, seqs, _ = filled
    r = Recall(store, metric=metric, **SMALL)
    assert r._head is not None and r._head_count == r.count  # the head graph answers
    for i in (0, 7, 333, 1199):
        q = x[i] * np.float32(2.5)
        got, scores = r.search(q, 10)
        assert got.dtype == np.int64 and scores.dtype == np.float32
        for same in (q.tolist(), q.astype(np.float64)):
            again, again_scores = r.search(same, 10)
            assert again.tolist() == got.tolist() and again_scores.tobytes() == scores.tobytes()
        hits = r.recall(q, 10, deltas=False)
        assert [h.seq for h in hits] == got.tolist() and [h.score for h in hits] == scores.tolist()
    if metric == "cosine":
        with pytest.raises(ValidationError, match="zero vector"):
            r.search(np.zeros(DIM, dtype=np.float32))
    with pytest.raises(ValidationError, match="query: must be finite"):
        r.search(np.full(DIM, np.inf, dtype=np.float32))


def test_inner_product_metric(filled):
    store, x, seqs, _ = filled
    r = Recall(store, metric="ip", **SMALL)
    q = x[20] * 3
    got, scores = r.search(q, 5)
    want = [seqs[i] for i in np.argsort(-(x @ q))[:5]]
    assert len(set(got.tolist()) & set(want)) >= 4
    assert scores[0] == pytest.approx(float(np.max(x @ q)), rel=1e-4)


def test_queries_and_appends_from_threads(filled):
    store, x, seqs, _ = filled
    r = Recall(store, **SMALL)
    errors: list[BaseException] = []

    def query(seed):
        rng = np.random.default_rng(seed)
        try:
            for i in rng.integers(0, 1200, 150):
                got, _ = r.search(x[i], 5, as_of=None if i % 2 else seqs[int(i)])
                assert len(got) == 5
        except BaseException as e:  # any exception: reported below
            errors.append(e)

    threads = [threading.Thread(target=query, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    for lo in range(0, 300, 30):
        store.append_batch(deltas(vectors(30, seed=lo + 100), start=10_000 + lo))
        r.catch_up()
    for t in threads:
        t.join()
    assert not errors and len(r) == 1500


# -- item 5: text in, without a model ------------------------------------------------------------

def test_hashing_embedder_is_deterministic_and_normalised():
    e = HashingEmbedder()
    a = e.embed(["Which database should we choose?", "", "database choices"])
    assert a.shape == (3, 512) and a.dtype == np.float32
    assert np.linalg.norm(a[0]) == pytest.approx(1.0) and not a[1].any()
    assert np.array_equal(a, HashingEmbedder().embed(["Which database should we choose?", "", "database choices"]))
    other = e.embed(["the weather in Lisbon is sunny"])[0]
    assert a[0] @ a[2] > 0.3 > abs(a[0] @ other)
    with pytest.raises(ValidationError, match="wrap one text in a list"):
        e.embed("text")


def test_embed_delta_fills_the_vector_from_text():
    d = braidlog.delta("s", "message", {"text": "use LMDB for the log"})
    filled = embed_delta(d)
    assert filled.vector is not None and filled.vector.dim == 512 and filled.id == d.id
    assert embed_delta(filled) is filled
    assert delta_text(braidlog.delta("s", "tool_result", {"tool": "search", "output": ["a", {"b": "c"}]})) \
        == "a\nc\nsearch"
    with pytest.raises(ValidationError, match="has no text to embed"):
        embed_delta(braidlog.delta("s", "tick", {}))


def test_text_recall_and_views(tmp_path):
    braid = braidlog.open(tmp_path / "store", projections=[])
    say = [("We will store agent memory in SQLite.", "decision"),
           ("The weather tomorrow is sunny.", "chat"),
           ("Database choice: LMDB replaces SQLite for agent memory.", "decision")]
    seqs = []
    for i, (text, tag) in enumerate(say):
        seqs.append(braid.append(embed_delta(braidlog.delta("s", "message", {"text": text}, tags=(tag,),
                                                            ts=T0 + timedelta(minutes=i)))))
    now = recall_for(braid).recall("database choice for agent memory", 1)
    then = recall_at(braid.at(seqs[1]), "database choice for agent memory", 1)
    assert "LMDB" in now[0].delta.payload["text"] and "SQLite" in then[0].delta.payload["text"]
    assert then[0].seq <= seqs[1]
    assert recall_for(braid).recall("weather", 1, tags="decision")[0].seq in (seqs[0], seqs[2])
    close_for(braid)
    braid.close()
    assert (tmp_path / "store" / "recall" / "default.cosine" / "meta.msgpack").exists()


def test_a_space_without_vectors_leaves_no_directory(tmp_path, capsys):
    """`recall --space TYPO` answers nothing, says why, and writes nothing into the store."""
    from braidlog.cli import main

    store = tmp_path / "store"
    with braidlog.LmdbLog(store) as log:
        log.append(embed_delta(braidlog.delta("s", "message", {"text": "LMDB for memory"}, ts=T0)))
    assert main(["--store", str(store), "recall", "memory", "--space", "defualt"]) == 0
    out, err = capsys.readouterr()
    assert "no vector in space 'defualt'" in err and "nothing to recall" in out
    assert not (store / "recall").exists()
    assert main(["--store", str(store), "recall", "memory", "--json"]) == 0
    assert json.loads(capsys.readouterr()[0])["hits"]
    assert [p.name for p in (store / "recall").iterdir()] == ["default.cosine"]


def test_a_space_without_vectors_is_not_scanned_for(tmp_path, monkeypatch):
    """The store lists its vector spaces: a space it does not hold costs no scan of the log."""
    with braidlog.LmdbLog(tmp_path / "store") as log:
        log.append_batch([braidlog.delta("s", "message", {"text": f"m{i}"}, ts=T0) for i in range(50)])
        log.append(embed_delta(braidlog.delta("s", "message", {"text": "LMDB"}, ts=T0)))
        assert log.spaces() == {"default": DEFAULT_DIM}
        scanned = []
        real = log.scan_bodies
        monkeypatch.setattr(log, "scan_bodies", lambda *a: scanned.append(a) or real(*a))
        r = Recall(log, "elsewhere")
        assert r.recall("LMDB", 3) == [] and r.covered_seq == 51 and scanned == []
        r.close()
        assert Recall(log, "default").recall("LMDB", 1)[0].seq == 51 and scanned


# -- memory: what is kept per vector ---------------------------------------------------------------

def test_rows_in_chunks_slice_and_take_like_one_array(monkeypatch):
    from braidlog.recall import vectors

    monkeypatch.setattr(vectors, "CHUNK", 8)
    rng = np.random.default_rng(3)
    rows, ref = vectors.Rows(5), np.zeros((0, 5), dtype=np.float32)
    for m in (3, 8, 1, 13, 7, 0, 9):
        block = rng.normal(size=(m, 5)).astype(np.float32)
        rows.append(block)
        ref = np.concatenate([ref, block])
    assert rows.n == len(ref) == 41 and rows.nbytes == 6 * 8 * 5 * 4
    for lo, hi in ((0, 41), (3, 8), (7, 9), (8, 16), (5, 30), (40, 41), (12, 12)):
        assert np.array_equal(rows.slice(lo, hi), ref[lo:hi]), (lo, hi)
    pos = np.array([0, 7, 8, 9, 23, 24, 40], dtype=np.int64)
    assert np.array_equal(rows.take(pos), ref[pos])


def test_memory_is_one_numpy_copy_one_graph_and_compact_columns(filled):
    store, x, seqs, _ = filled
    r = Recall(store, **SMALL)
    m = r.memory()
    n, d = r.count, r.dim
    from braidlog.recall.vectors import CHUNK

    assert 4 * d * n <= m["vectors"] <= 4 * d * (n + CHUNK)
    assert m["columns"] < 120 * 2 * n  # numpy columns (capacity at most twice the count)
    assert 4 * d * n <= m["head graph"] and m["as-of blocks"] == 0  # blocks only when asked for
    r.search(x[0], as_of=seqs[700])
    assert r.memory()["as-of blocks"] == 0  # a default as-of query searches the head graph
    r.search(x[0], as_of=seqs[700], reproducible=True)
    blocks = r._blocks.cover(r._cols.count_upto(seqs[700]))[0]
    per_vector = m["head graph"] / n  # a block spends what the head graph spends per vector
    held = sum(r._blocks.size(level) for level, _ in blocks)
    assert r.memory()["as-of blocks"] == pytest.approx(per_vector * held, rel=0.25)


def test_a_query_filtered_by_one_braid_searches_that_braids_own_graph(filled):
    """Filtered by one braid alone, the index builds that braid's graph on first use and keeps
    it in step: answers agree with exact search over the braid, as of a point too, and a vector
    appended to the braid later is found."""
    store, x, seqs, ds = filled
    r = Recall(store, exact_max=50, exact_ratio=0.0, **SMALL)
    in_b1 = {store.seq_of(d.id) for d in ds if d.vector is not None and d.braid_id == "b1"}
    assert r.memory()["braid graphs"] == 0
    rng = np.random.default_rng(8)
    agree = 0
    for i in rng.integers(0, 1200, 20):
        got, _ = r.search(x[i], 10, braid="b1")
        assert len(got) == 10 and set(got.tolist()) <= in_b1
        agree += len(set(got.tolist()) & set(exact(x, seqs, x[i], 10, keep=lambda j: seqs[j] in in_b1)))
    assert agree >= 0.95 * 200
    assert r.memory()["braid graphs"] > 0
    k_seq = seqs[600]
    got, _ = r.search(x[5], 10, braid="b1", as_of=k_seq)
    assert set(got.tolist()) <= {s for s in in_b1 if s <= k_seq} and len(got) == 10
    before = r.memory()["braid graphs"]
    more = np.random.default_rng(9).normal(size=(200, DIM)).astype(np.float32)
    added = store.append_batch([make_delta(9000 + i, braid="b1", kind="observation", vector=Vector.of(v))
                                for i, v in enumerate(more)])  # past block: into both graphs
    got, _ = r.search(more[150], 1, braid="b1")
    assert int(got[0]) == added[150]
    assert r.memory()["braid graphs"] > before
    plain = Recall(store, directory=False, exact_max=50, exact_ratio=0.0, braid_graphs=False, **SMALL)
    assert int(plain.search(more[150], 1, braid="b1")[0][0]) == added[150]
    assert plain.memory()["braid graphs"] == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim, Linux only")
def test_the_heap_a_catch_up_freed_goes_back_to_the_system():
    from braidlog.recall.vectors import trim_heap

    def anon_mb() -> int:
        with open("/proc/self/status") as f:
            return next(int(ln.split()[1]) // 1024 for ln in f if ln.startswith("RssAnon"))

    trim_heap()  # what the process freed before (a test run's heap has holes of its own)
    before = anon_mb()
    held = [bytes(1500) + bytes([i % 256]) for i in range(60_000)]  # as a catch-up's vector bytes
    last = held[-1]  # one still in use above the freed ones: the heap cannot shrink by itself
    del held
    freed = anon_mb()
    trim_heap()
    assert freed - before > 60 and anon_mb() < before + 30, (before, freed, anon_mb())
    assert last
