"""The saver's direct reads (refers-to keys, ``at``, ``latest``, ``mono``) and skip-delta values:
a saver opened on a long thread answers without reading the thread's history, and what it
answers equals what the thread's index (the path it takes for tombstoned threads and records
written before the keys) gives, checkpoint by checkpoint, on a real graph with forks."""

from __future__ import annotations

import os
import random
import sys

import pytest

pytest.importorskip("langgraph.graph")

from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import empty_checkpoint

import braidlog
from braidlog.integrations.langgraph import BraidlogSaver
from braidlog.integrations.langgraph._encoding import KINDS, b64, bdiff, bpatch, braid_of, declare_kinds
from braidlog.integrations.langgraph._threads import THREAD_PREFIX

sys.path.insert(0, os.path.dirname(__file__))
from lg_graph import build


def run_turns(graph, thread: str, turns: int) -> None:
    for i in range(turns):
        graph.invoke({"notes": [f"turn {i}"], "count": i}, {"configurable": {"thread_id": thread}})


def indexed(saver: BraidlogSaver, config: dict) -> object:
    """get_tuple through the thread's index, as for a tombstoned thread."""
    conf = config["configurable"]
    with saver._lock:
        idx = saver._thread(conf["thread_id"])
        ns = conf.get("checkpoint_ns", "")
        if conf.get("checkpoint_id") is None:
            found = idx.latest(saver._runs, ns)
            return None if found is None else saver._tuple(idx, ns, found[1])
        cp = idx.get(saver._runs, ns, conf["checkpoint_id"])
        return None if cp is None else saver._tuple(idx, ns, cp)


def test_a_fresh_saver_reads_a_long_thread_without_its_history(tmp_path):
    path = str(tmp_path / "s.lmdb")
    with BraidlogSaver(path) as saver:
        graph = build(saver)
        run_turns(graph, "t", 40)
        want = graph.get_state({"configurable": {"thread_id": "t"}})
        history = list(graph.get_state_history({"configurable": {"thread_id": "t"}}))
    with BraidlogSaver(path) as fresh:
        graph = build(fresh)
        got = graph.get_state({"configurable": {"thread_id": "t"}})
        assert got.values == want.values and got.config == want.config and got.next == want.next
        page = list(fresh.list({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, limit=10))
        assert [p.config for p in page] == [h.config for h in history[:10]]
        assert fresh._threads == {}  # no thread index was built: nothing scanned the thread


def test_direct_reads_equal_the_index_on_every_checkpoint_with_forks(tmp_path):
    with BraidlogSaver(str(tmp_path / "s.lmdb")) as saver:
        graph = build(saver)
        config = {"configurable": {"thread_id": "f"}}
        run_turns(graph, "f", 6)
        past = [h for h in graph.get_state_history(config) if h.next == ("act",)]
        fork = graph.update_state(past[2].config, {"notes": ["forked"]}, as_node="plan")
        graph.invoke(None, fork)
        run_turns(graph, "f", 2)
        history = list(saver.list(config))
        assert len(history) > 30
        for h in history:
            direct = saver.get_tuple(h.config)
            assert direct == indexed(saver, h.config) == h
        assert saver.get_tuple(config) == indexed(saver, config) == history[0]
        before = history[7].config
        assert list(saver.list(config, before=before, limit=5)) == history[8:13]
        assert saver._threads.keys() == {braid_of(THREAD_PREFIX, "f")}  # built by `indexed` alone


def test_a_tombstoned_thread_is_read_through_its_index(tmp_path):
    with BraidlogSaver(str(tmp_path / "s.lmdb"), erase=False) as saver:
        graph = build(saver)
        run_turns(graph, "p", 3)
        latest = saver.get_tuple({"configurable": {"thread_id": "p"}})
        saver.prune(["p"])
        assert saver.get_tuple({"configurable": {"thread_id": "p"}}) == latest
        assert [t.config for t in saver.list({"configurable": {"thread_id": "p"}})] == [latest.config]
        run_turns(graph, "p", 1)  # the thread goes on after the prune
        assert graph.get_state({"configurable": {"thread_id": "p"}}).values["count"] == 2
        assert len(list(saver.list({"configurable": {"thread_id": "p"}}))) == 6


def test_a_growing_value_is_rebuilt_from_few_records(tmp_path):
    """A value that grows each put is stored as skip deltas: the 300th version is rebuilt from
    at most popcount(n) + 1 records, and every version reads back as put."""
    rng = random.Random(7)
    with BraidlogSaver(str(tmp_path / "s.lmdb")) as saver:
        config = {"configurable": {"thread_id": "g", "checkpoint_ns": ""}}
        value: list = []
        puts = []
        for i in range(300):
            if i % 50 == 49:
                value = value[:-3] + [f"changed {i}"]  # not only appends: an edit in place
            value = [*value, f"item {i} " + "x" * rng.randrange(50)]
            cp = empty_checkpoint()
            cp["channel_values"] = {"items": value}
            cp["channel_versions"] = {"items": saver.get_next_version(None if i == 0 else puts[-1][1], None)}
            config = saver.put(config, cp, {"step": i}, dict(cp["channel_versions"]))
            puts.append((config, cp["channel_versions"]["items"], list(value)))
        fresh = BraidlogSaver(saver.braid)
        for config, _, want in puts[::7] + puts[-1:]:
            assert fresh.get_tuple(config).checkpoint["channel_values"]["items"] == want
        seq = fresh._lookup.head("g", "")[0]
        depth = 1
        link = fresh._values.link(seq, "items")
        while link is not None and link[0] > 0:
            depth += 1
            link = fresh._values.link(link[1], "items")
        assert depth <= 9  # at most popcount(n) + 1 for n < 512
        total = sum(len(r.delta.payload.get("values", {}).get("items", {}).get("b", ""))
                    for r in fresh.log.scan_braid(braid_of(THREAD_PREFIX, "g")))
        assert total < 20 * len(repr(value))  # whole copies stored a few times, not 300


def test_a_thread_written_before_the_keys_is_read_and_continued(tmp_path):
    """Records as the saver wrote them before its refers-to keys (kinds at version 1, no
    ``key``, ``at``, ``latest``): read through the thread's index, continued by puts."""
    path = str(tmp_path / "old.lmdb")
    old = {k: {**s, "properties": {p: v for p, v in s["properties"].items()
                                   if k == "langgraph.item" or p not in ("key", "head", "at", "latest", "mono",
                                                                         "thread")}}
           for k, s in KINDS.items()}
    with braidlog.open(path, projections=[]) as b:
        from braidlog.kind_schema import declare_kind
        for name, schema in old.items():
            declare_kind(b, name, schema, owner="langgraph", version=1)
        with BraidlogSaver(str(tmp_path / "new.lmdb")) as source:
            graph = build(source)
            run_turns(graph, "o", 2)
            for rec in source.log.scan_braid(braid_of(THREAD_PREFIX, "o")):
                p = {k: v for k, v in rec.delta.payload.items()
                     if k not in ("key", "head", "at", "latest", "mono", "_v")}
                if rec.delta.kind == "langgraph.checkpoint":  # each value whole, as version 1 could
                    p["values"] = {ch: enc if enc["t"] == "empty" else
                                   {"v": enc["v"], "t": enc["t"],
                                    "b": b64(source._values.bytes_at(rec.seq, ch)[1])}
                                   for ch, enc in p["values"].items()}
                b.append(braidlog.delta(rec.delta.braid_id, rec.delta.kind, p,
                                        provenance=rec.delta.provenance))
            want = source.get_tuple({"configurable": {"thread_id": "o"}})
    with BraidlogSaver(path) as saver:
        declare_kinds(saver.braid)  # already at version 2: nothing more
        assert saver.log.registry.get("langgraph.checkpoint").refers is not None
        config = {"configurable": {"thread_id": "o"}}
        got = saver.get_tuple(config)
        assert got.checkpoint["channel_values"] == want.checkpoint["channel_values"]
        graph = build(saver)
        run_turns(graph, "o", 1)
        state = graph.get_state(config)
        assert state.values["notes"][-1] == "review 11" and state.values["count"] == 2
        assert len(list(saver.list(config))) == 15


def test_writes_made_while_a_put_is_in_flight_ride_in_the_next_puts_commit(tmp_path):
    """LangGraph saves a step's writes while that step's checkpoint is being put: they wait for
    the thread's next put and are appended in its batch (one commit), and put_writes returns
    once they are durable; with no put coming they commit alone after the wait."""
    import threading
    import time

    from braidlog.integrations.langgraph._ride import WAIT

    with BraidlogSaver(str(tmp_path / "s.lmdb")) as saver:
        config = {"configurable": {"thread_id": "r", "checkpoint_ns": ""}}
        first = saver.put(config, empty_checkpoint(), {"step": 0}, {})
        saver._rides.putting("r", +1)  # a put of the thread in flight, as LangGraph's would be
        done = []
        writer = threading.Thread(target=lambda: done.append(
            saver.put_writes(first, [("notes", ["a"])], "task-1")))
        writer.start()
        time.sleep(WAIT / 5)
        assert not done  # waiting for the next put
        nxt = saver.put(first, empty_checkpoint(), {"step": 1}, {})
        writer.join()
        saver._rides.putting("r", -1)
        assert done == [None]
        records = list(saver.log.scan_braid(braid_of(THREAD_PREFIX, "r")))
        assert [r.delta.kind for r in records[-2:]] == ["langgraph.writes", "langgraph.checkpoint"]
        assert records[-1].seq == records[-2].seq + 1  # one batch
        assert saver.get_tuple(first).pending_writes == [("task-1", "notes", ["a"])]
        assert saver.get_tuple(nxt).checkpoint["id"] == nxt["configurable"]["checkpoint_id"]

        saver._rides.putting("r", +1)  # a put in flight, and none after it: the writes go alone
        started = time.perf_counter()
        saver.put_writes(nxt, [("notes", ["b"])], "task-2")
        assert time.perf_counter() - started >= WAIT * 0.9
        saver._rides.putting("r", -1)
        assert saver.get_tuple(nxt).pending_writes == [("task-2", "notes", ["b"])]


def test_a_put_after_another_savers_put_places_against_it(tmp_path):
    """A saver keeps its last put of a namespace for the next; a record anyone else appended to
    the thread since (here another saver on the same store, with a greater checkpoint id) makes
    it look the namespace up again, so the latest stays the greatest id."""
    path = str(tmp_path / "s.lmdb")

    def cp(cid: str, notes: list[str], version: int) -> dict:
        c = empty_checkpoint()
        c["id"], c["channel_values"], c["channel_versions"] = cid, {"notes": notes}, {"notes": version}
        return c

    def conf(cid: str | None = None) -> dict:
        c = {"thread_id": "t", "checkpoint_ns": ""}
        return {"configurable": c if cid is None else {**c, "checkpoint_id": cid}}

    with BraidlogSaver(path) as a, BraidlogSaver(path) as b:
        a.put(conf(), cp("3", ["a"], 1), {"step": 0}, {"notes": 1})
        a.put(conf("3"), cp("4", ["a", "b"], 2), {"step": 1}, {"notes": 2})
        b.put(conf("4"), cp("9", ["a", "b", "z"], 3), {"step": 2}, {"notes": 3})
        a.put(conf("4"), cp("5", ["a", "b", "c"], 4), {"step": 2}, {"notes": 4})
        a.put(conf("5"), cp("6", ["a", "b", "c", "d"], 5), {"step": 3}, {"notes": 5})
        for saver in (a, b):
            assert saver.get_tuple(conf()).checkpoint["id"] == "9"
            assert [t.checkpoint["id"] for t in saver.list(conf())] == ["9", "6", "5", "4", "3"]
            assert saver.get_tuple(conf("6")).checkpoint["channel_values"] == {"notes": ["a", "b", "c", "d"]}
    with BraidlogSaver(path) as fresh:
        assert fresh.get_tuple(conf()).checkpoint["id"] == "9"
        assert fresh.get_tuple(conf("6")).checkpoint["channel_values"] == {"notes": ["a", "b", "c", "d"]}


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.binary(max_size=40), st.integers(0, 400), st.integers(0, 8),
       st.binary(max_size=3))
def test_a_byte_delta_makes_the_new_value_out_of_the_old(old, piece, at, cut, header):
    """Whatever the two values, the ops bdiff gives (when it gives any) rebuild the new one:
    a piece put in or cut out anywhere, a header changed in front (a list that grew)."""
    for new in (old[:at] + piece + old[at + cut:], header + old[len(header):] + piece):
        ops = bdiff(old, new)
        assert ops is None or bpatch(old, ops) == new
