"""BraidlogStore's contract (LangGraph ships no test suite for BaseStore): every operation,
filters and namespaces as LangGraph's own stores apply them, TTLs, search by query through
recall, history and at, on a real LMDB store."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, timedelta

import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.store.base import GetOp, InvalidNamespaceError, ListNamespacesOp, MatchCondition, PutOp, SearchOp

import braidlog
from braidlog.integrations.langgraph import BraidlogStore


@pytest.fixture
def store(tmp_path):
    with BraidlogStore(str(tmp_path / "mem.lmdb")) as s:
        yield s


def head(s):
    return s._braid.head().seq


def test_put_get_update_delete(store):
    assert store.get(("users", "u1"), "prefs") is None
    store.put(("users", "u1"), "prefs", {"lang": "en", "tags": ["a"]})
    first = store.get(("users", "u1"), "prefs")
    assert first.value == {"lang": "en", "tags": ["a"]}
    assert first.namespace == ("users", "u1") and first.key == "prefs"
    assert first.created_at == first.updated_at
    store.put(("users", "u1"), "prefs", {"lang": "fr"})
    second = store.get(("users", "u1"), "prefs")
    assert second.value == {"lang": "fr"}
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    store.delete(("users", "u1"), "prefs")
    assert store.get(("users", "u1"), "prefs") is None
    at = head(store)
    store.delete(("users", "u1"), "prefs")  # not there: nothing written
    store.delete(("nobody",), "nothing")
    assert head(store) == at
    store.put(("users", "u1"), "prefs", {"lang": "de"})  # created again: a new created_at
    third = store.get(("users", "u1"), "prefs")
    assert third.created_at > second.created_at


def test_values_that_are_not_plain_json_round_trip(store):
    from datetime import datetime
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    store.put(("x",), "k", {"when": when, "pair": (1, 2), "raw": b"\x00\xff"})
    value = store.get(("x",), "k").value
    assert value["when"] == when and value["raw"] == b"\x00\xff" and list(value["pair"]) == [1, 2]
    with pytest.raises(braidlog.ValidationError) as e:  # past what LangGraph's serializer takes
        store.put(("x",), "big", {"n": 2**70})
    assert e.value.field == "value" and store.get(("x",), "big") is None


def test_search_by_prefix_filter_limit_offset(store):
    for i in range(6):
        store.put(("docs", "team" if i % 2 else "solo"), f"d{i}",
                  {"n": i, "kind": "even" if i % 2 == 0 else "odd", "meta": {"lang": "en" if i < 3 else "fr"}})
    store.put(("other",), "z", {"n": 99})
    everything = store.search(("docs",), limit=100)
    assert [i.key for i in everything] == ["d5", "d4", "d3", "d2", "d1", "d0"]  # newest first
    assert all(i.score is None for i in everything)
    assert [i.key for i in store.search(("docs", "team"))] == ["d5", "d3", "d1"]
    assert [i.key for i in store.search((), limit=3)] == ["z", "d5", "d4"]
    assert [i.key for i in store.search(("docs",), filter={"kind": "even"})] == ["d4", "d2", "d0"]
    assert [i.key for i in store.search(("docs",), filter={"meta": {"lang": "fr"}})] == ["d5", "d4", "d3"]
    assert [i.key for i in store.search(("docs",), filter={"n": {"$gte": 2, "$lt": 4}})] == ["d3", "d2"]
    assert [i.key for i in store.search(("docs",), filter={"n": {"$ne": 5}}, limit=2, offset=1)] == ["d3", "d2"]
    assert [i.key for i in store.search(("docs",), filter={"n": {"$gt": 1}, "kind": "odd"})] == ["d5", "d3"]
    assert store.search(("docs",), filter={"missing": 1}) == []
    assert store.search(("nothing",)) == []
    with pytest.raises(braidlog.ValidationError) as e:
        store.search(("docs",), filter={"n": {"$regex": "x"}})
    assert e.value.field == "filter.n.$regex"


def test_list_namespaces(store):
    for ns in [("a", "b", "c"), ("a", "b", "d"), ("a", "e"), ("x", "b")]:
        store.put(ns, "k", {"v": 1})
    assert store.list_namespaces() == [("a", "b", "c"), ("a", "b", "d"), ("a", "e"), ("x", "b")]
    assert store.list_namespaces(prefix=("a",)) == [("a", "b", "c"), ("a", "b", "d"), ("a", "e")]
    assert store.list_namespaces(suffix=("b",)) == [("x", "b")]
    assert store.list_namespaces(prefix=("*", "b")) == [("a", "b", "c"), ("a", "b", "d"), ("x", "b")]
    assert store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "e"), ("x", "b")]
    assert store.list_namespaces(limit=2, offset=1) == [("a", "b", "d"), ("a", "e")]
    store.delete(("a", "e"), "k")
    assert ("a", "e") not in store.list_namespaces()


def test_batch_reads_see_the_store_before_its_writes_and_the_last_put_counts(store):
    store.put(("b",), "k", {"v": 0})
    results = store.batch([
        PutOp(("b",), "k", {"v": 1}),
        GetOp(("b",), "k"),
        PutOp(("b",), "k", {"v": 2}),
        SearchOp(("b",)),
        ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("b",)),)),
    ])
    assert results[0] is None and results[2] is None
    assert results[1].value == {"v": 0} and results[3][0].value == {"v": 0}
    assert results[4] == [("b",)]
    assert store.get(("b",), "k").value == {"v": 2}
    assert [v.value for v in store.history(("b",), "k")] == [{"v": 0}, {"v": 2}]


@pytest.mark.parametrize("namespace", [(), ("langgraph", "x"), ("a.b",), ("",), ("a", 1), ("nul\x00",),
                                       "text", 7, None])
def test_bad_namespaces_raise_langgraphs_error_and_write_nothing(store, namespace):
    at = head(store)
    with pytest.raises(InvalidNamespaceError):
        store.put(namespace, "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(("ok",), "k", {"v": 1}), PutOp(namespace, "k", {"v": 1})])
    assert head(store) == at
    assert store.get(("ok",), "k") is None


def test_other_bad_input_is_a_braidlog_error_and_writes_nothing(store):
    at = head(store)
    for call in [lambda: store.put(("a",), "k", ["not", "a", "dict"]),
                 lambda: store.put(("a",), "k", {1: "int key"}),
                 lambda: store.put(("a",), "k", {"f": lambda: 1}),
                 lambda: store.put(("a",), "k", {"v": 1}, ttl=-5),
                 lambda: store.put(("a",), "k", {"v": 1}, index="text"),
                 lambda: store.batch([PutOp(("a",), "k", {"v": 1}), "not an op"]),
                 lambda: store.search(("a",), limit=-1),
                 lambda: store.search(("a",), query=5),
                 lambda: store.list_namespaces(max_depth=0),
                 lambda: store.get(("a",), "k", refresh_ttl="yes"),
                 lambda: store.at("no such delta"),
                 lambda: store.at(10**9),
                 lambda: store.history(("a",), 5)]:
        with pytest.raises(braidlog.BraidlogError):
            call()
    assert head(store) == at


def test_history_every_version_oldest_first(store):
    store.put(("h",), "k", {"v": 1})
    store.put(("h",), "other", {"v": "x"})
    store.put(("h",), "k", {"v": 2})
    store.delete(("h",), "k")
    store.put(("h",), "k", {"v": 3})
    versions = store.history(("h",), "k")
    assert [v.value for v in versions] == [{"v": 1}, {"v": 2}, None, {"v": 3}]
    assert [v.seq for v in versions] == sorted(v.seq for v in versions)
    assert all(v.provenance.kind == "system" and v.provenance.source == "langgraph" for v in versions)
    assert [v.updated_at for v in versions] == sorted(v.updated_at for v in versions)
    for v in versions:  # each version is the delta at its seq
        rec = store._braid.log.read(v.seq)
        assert rec.delta.id == v.id and rec.delta.kind == "langgraph.item"
    assert store.history(("h",), "never") == []


def test_at_a_seq_an_id_or_a_time_reads_the_store_as_it_was(store):
    store.put(("t", "a"), "k", {"v": 1})
    v1 = store.history(("t", "a"), "k")[-1]
    time.sleep(0.01)
    store.put(("t", "a"), "k", {"v": 2})
    store.put(("t", "b"), "k", {"v": "b"})
    store.delete(("t", "a"), "k")
    for point in (v1.seq, v1.id, v1.updated_at + timedelta(microseconds=1)):
        past = store.at(point)
        assert past.get(("t", "a"), "k").value == {"v": 1}
        assert [i.value for i in past.search(("t",))] == [{"v": 1}]
        assert past.list_namespaces() == [("t", "a")]
        assert [v.value for v in past.history(("t", "a"), "k")] == [{"v": 1}]
    now = store.at(head(store))
    assert now.get(("t", "a"), "k") is None and now.list_namespaces() == [("t", "b")]
    assert store.at(0).list_namespaces() == []
    at = head(store)
    with pytest.raises(braidlog.ValidationError):
        store.at(v1.seq).put(("t", "a"), "k", {"v": 9})
    with pytest.raises(braidlog.ValidationError):
        store.at(v1.seq).delete(("t", "a"), "k")
    with pytest.raises(braidlog.ValidationError):
        asyncio.run(store.at(v1.seq).aput(("t", "a"), "k", {"v": 9}))
    assert head(store) == at


def test_ttl_expires_refreshes_and_sweeps(tmp_path):
    ttl = {"default_ttl": 0.005, "refresh_on_read": True}  # 0.3 seconds
    with BraidlogStore(str(tmp_path / "ttl.lmdb"), ttl=ttl) as store:
        store.put(("s",), "default", {"v": 1})
        store.put(("s",), "short", {"v": 2}, ttl=0.002)
        store.put(("s",), "forever", {"v": 3}, ttl=None)
        cur = store._items(("s",)).live
        assert cur["default"].ttl == 0.005 and cur["forever"].ttl is None
        first = cur["default"].expires_at
        assert first - cur["default"].updated_at == timedelta(minutes=0.005)
        time.sleep(0.05)
        at = head(store)
        assert store.get(("s",), "default", refresh_ttl=False).value == {"v": 1}
        assert head(store) == at  # no refresh asked: nothing written
        assert store.get(("s",), "default").value == {"v": 1}  # refresh_on_read: one delta
        assert head(store) == at + 1
        assert store._items(("s",)).live["default"].expires_at > first
        assert store.get(("s",), "forever").value == {"v": 3}
        assert head(store) == at + 1  # no TTL, nothing to refresh
        time.sleep(0.15)
        assert store.sweep_ttl() == 1  # "short" ran out; "default" was refreshed
        assert store.get(("s",), "short") is None
        assert [v.expired for v in store.history(("s",), "short")] == [False, True]
        time.sleep(0.35)
        assert store.sweep_ttl() == 1 and store.get(("s",), "default") is None
        assert store.get(("s",), "forever").value == {"v": 3}
        assert store.sweep_ttl() == 0


def test_omit_expired_hides_what_ran_out_before_a_sweep(tmp_path):
    with BraidlogStore(str(tmp_path / "omit.lmdb"), ttl={"omit_expired": True}) as store:
        store.put(("s",), "k", {"v": 1}, ttl=0.001)
        assert store.get(("s",), "k", refresh_ttl=False).value == {"v": 1}
        time.sleep(0.1)
        assert store.get(("s",), "k", refresh_ttl=False) is None
        assert store.search(("s",)) == [] and store.list_namespaces() == []
    with BraidlogStore(str(tmp_path / "keep.lmdb"), ttl={}) as store:
        store.put(("s",), "k", {"v": 1}, ttl=0.001)
        time.sleep(0.1)
        assert store.get(("s",), "k", refresh_ttl=False).value == {"v": 1}  # until swept


def test_the_ttl_sweeper_thread(tmp_path):
    with BraidlogStore(str(tmp_path / "sweeper.lmdb"), ttl={"sweep_interval_minutes": 1}) as store:
        future = store.start_ttl_sweeper()
        assert store.stop_ttl_sweeper(timeout=5)
        assert future.result(timeout=5) is None


def _embed():
    pytest.importorskip("braidlog.recall")
    from braidlog.recall import HashingEmbedder

    h = HashingEmbedder(64)
    return lambda texts: h.embed(texts).tolist()


@pytest.mark.parametrize("mode", ["vector", "keyword", "hybrid"])
def test_search_by_query_through_recall(tmp_path, mode):
    index = {"dims": 64, "embed": _embed(), "fields": ["text"]}
    with BraidlogStore(str(tmp_path / f"{mode}.lmdb"), index=index, mode=mode) as store:
        store.put(("m", "u1"), "a", {"text": "the user prefers dark mode in the editor"})
        store.put(("m", "u1"), "b", {"text": "lunch is at noon on fridays"})
        store.put(("m", "u2"), "c", {"text": "ERR-4012 happened during the deploy"})
        store.put(("m", "u2"), "d", {"text": "not searchable"}, index=False)
        best = store.search(("m",), query="dark mode editor", limit=2)
        assert best[0].key == "a" and best[0].score is not None
        assert store.search(("m",), query="ERR-4012 deploy", limit=1)[0].key == "c"
        assert {i.key for i in store.search(("m", "u1"), query="ERR-4012 deploy", limit=5)} <= {"a", "b"}
        found = store.search(("m",), query="dark mode", filter={"text": {"$ne": "x"}}, limit=10)
        assert found[-1].key == "d" and found[-1].score is None  # unindexed: last, unscored
        assert store._braid.log.read(store.history(("m", "u1"), "a")[0].seq).delta.payload["text"]
        # an item updated: its new text is what is found, as of now; the old one as of then
        before = head(store)
        store.put(("m", "u1"), "a", {"text": "the user now prefers light mode"})
        assert store.search(("m",), query="light mode", limit=1)[0].key == "a"
        past = store.at(before).search(("m",), query="dark mode editor", limit=1)
        assert past[0].key == "a" and past[0].value == {"text": "the user prefers dark mode in the editor"}


def test_index_config_is_checked(tmp_path):
    with pytest.raises(braidlog.ValidationError):
        BraidlogStore(str(tmp_path / "i1"), index={"dims": 8})  # no embed, mode vector
    with pytest.raises(braidlog.ValidationError):
        BraidlogStore(str(tmp_path / "i2"), index={"dims": 0, "embed": lambda t: []})
    with pytest.raises(braidlog.ValidationError):
        BraidlogStore(str(tmp_path / "i3"), mode="fuzzy")
    with BraidlogStore(str(tmp_path / "i4"), index={"dims": 3, "embed": lambda t: [[1.0, 2.0]] * len(t)}) as s:
        with pytest.raises(braidlog.ValidationError):
            s.put(("a",), "k", {"text": "x"})  # the embedder gives 2 numbers, not 3
        assert s.get(("a",), "k") is None


def test_async_operations(store):
    async def run():
        await store.aput(("as",), "k", {"v": 1})
        got = await store.aget(("as",), "k")
        found = await store.asearch(("as",))
        spaces = await store.alist_namespaces()
        await store.adelete(("as",), "k")
        return got, found, spaces, await store.aget(("as",), "k")
    got, found, spaces, gone = asyncio.run(run())
    assert got.value == {"v": 1} and found[0].key == "k" and spaces == [("as",)] and gone is None


def test_two_store_objects_on_one_braid_see_each_others_writes(tmp_path):
    braid = braidlog.open(str(tmp_path / "shared.lmdb"), projections=[])
    try:
        a, b = BraidlogStore(braid), BraidlogStore(braid)
        a.put(("s",), "k", {"v": 1})
        assert b.get(("s",), "k").value == {"v": 1}
        b.put(("s",), "k", {"v": 2})
        assert a.get(("s",), "k").value == {"v": 2}
        b.close()  # not its store: it stays open
        assert a.get(("s",), "k").value == {"v": 2}
    finally:
        braid.close()
