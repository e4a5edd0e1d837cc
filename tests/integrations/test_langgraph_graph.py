"""A real StateGraph compiled with BraidlogSaver, read and continued by a second process while
the first still has the store open."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("langgraph.graph")

from braidlog.integrations.langgraph import BraidlogSaver

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)
from lg_graph import build, summary  # noqa: E402  (after sys.path holds this folder)


def other_process(store, thread, *more):
    out = subprocess.run([sys.executable, os.path.join(HERE, "lg_graph.py"), str(store), thread, *more],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_second_process_sees_the_thread_mid_way_and_continues_it(tmp_path):
    store = tmp_path / "graph.lmdb"
    config = {"configurable": {"thread_id": "t-1"}}
    with BraidlogSaver(str(store)) as saver:
        graph = build(saver)
        out = graph.invoke({"notes": ["start"], "count": 0}, config)
        assert out == {"notes": ["start", "plan 0", "act 1", "review 3"], "count": 2}
        mine = summary(graph, "t-1")
        assert len(mine["history"]) == 5  # input, plan, act, review and the first empty one
        assert [h[2] for h in mine["history"]] == ["loop", "loop", "loop", "loop", "input"]

        # the store is still open here; the other process opens it, reads the same thread
        theirs = other_process(store, "t-1", "run")
        assert theirs == mine

        # and the turn it ran is seen here at once
        after = summary(graph, "t-1")
        assert after["values"] == {
            "notes": ["start", "plan 0", "act 1", "review 3", "from the other process",
                      "plan 100", "act 101", "review 7"], "count": 102}
        assert after["history"][len(after["history"]) - len(mine["history"]):] == mine["history"]
        assert len(after["history"]) == 10  # the second turn: input and four loop steps

        # a checkpoint of the past reads back as it was
        first_turn = graph.get_state({"configurable": {"thread_id": "t-1",
                                                       "checkpoint_id": mine["checkpoint_id"]}})
        assert first_turn.values == mine["values"]


def test_a_run_interrupted_in_one_process_is_resumed_by_another(tmp_path):
    """The thread stops before "act" (interrupt_before); with the store still open here, a
    second process sees it paused there, with the same history, and resumes it."""
    store = tmp_path / "paused.lmdb"
    config = {"configurable": {"thread_id": "paused"}}
    with BraidlogSaver(str(store)) as saver:
        graph = build(saver, interrupt_before=["act"])
        graph.invoke({"notes": ["start"], "count": 0}, config)
        mine = summary(graph, "paused")
        assert mine["next"] == ["act"] and mine["values"] == {"notes": ["start", "plan 0"], "count": 1}
        theirs = other_process(store, "paused", "resume")
        assert theirs == mine
        done = summary(graph, "paused")
        assert done["next"] == [] and done["values"] == {
            "notes": ["start", "plan 0", "act 1", "review 3"], "count": 2}
        assert done["history"][-len(mine["history"]):] == mine["history"]


def test_a_long_thread_stores_what_changed_not_every_state(tmp_path):
    """Every step adds one note: the log grows by about a note per step, while the state (and a
    whole snapshot per step) grows with the thread."""
    with BraidlogSaver(str(tmp_path / "long.lmdb")) as saver:
        graph = build(saver)
        config = {"configurable": {"thread_id": "long"}}
        graph.invoke({"notes": ["x" * 200], "count": 0}, config)
        for _ in range(40):
            graph.invoke({"notes": ["y" * 200], "count": 0}, config)
        state = graph.get_state(config).values
        assert len(state["notes"]) == 1 + 40 + 41 * 3
        stored = sum(len(r.delta.payload.get("values", {}).get("notes", {}).get("b", ""))
                     for r in saver.log.scan_kind("langgraph.checkpoint"))
        whole = len(json.dumps(state["notes"]))
        steps = sum(1 for _ in saver.log.scan_kind("langgraph.checkpoint"))
        # whole values are stored once per 33 versions at most; a snapshot per step would be
        # about steps * whole / 2
        assert stored < steps * whole / 8
        # and every checkpoint of the thread reads back equal to what a replay says it was
        history = list(graph.get_state_history(config))
        assert len(history) == steps
        counts = [len(h.values.get("notes", [])) for h in history]
        assert counts == sorted(counts, reverse=True)


def test_the_langgraph_projection_folds_threads_and_memories_at_any_point(tmp_path):
    import braidlog
    from braidlog.integrations.langgraph import PROJECTION, BraidlogStore

    path = str(tmp_path / "proj.lmdb")
    with BraidlogSaver(path, erase=False) as saver:  # deleted, not erased: the past still shows p
        graph = build(saver)
        graph.invoke({"notes": ["a"], "count": 0}, {"configurable": {"thread_id": "p"}})
        store = BraidlogStore(saver.braid)
        store.put(("mem",), "k", {"v": 1})
        mid = saver.braid.head().seq
        store.put(("mem",), "k", {"v": 2})
        graph.invoke({"notes": ["b"], "count": 0}, {"configurable": {"thread_id": "q"}})
        saver.delete_thread("p")
    with braidlog.open(path, projections=[PROJECTION]) as braid:
        now = braid.state("langgraph")
        assert set(now["threads"]) == {"q"}  # p was deleted
        assert now["threads"]["q"][""]["checkpoints"] == 5 and now["threads"]["q"][""]["step"] == 3
        assert now["items"] == {"mem": {"k": {"value": {"v": 2}, "seq": now["items"]["mem"]["k"]["seq"],
                                              "versions": 2}}}
        then = braid.at(mid).state("langgraph")
        assert set(then["threads"]) == {"p"} and then["items"]["mem"]["k"]["value"] == {"v": 1}
        assert then == PROJECTION.fold(r.delta for r in braid.log.scan(stop=mid + 1))
