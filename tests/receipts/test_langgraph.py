"""BraidlogStore(receipts=True): each search records a context receipt, inside a real LangGraph
StateGraph (the run is the thread, the turn the step and node) and outside one."""

from __future__ import annotations

from typing import TypedDict

import pytest

pytest.importorskip("langgraph.graph")

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from braidlog import ValidationError
from braidlog.integrations.langgraph import BraidlogStore
from braidlog.recall import HashingEmbedder
from braidlog.receipts import CONTEXT_USED, read_receipt

EMBEDDER = HashingEmbedder(64)
INDEX = {"dims": 64, "embed": lambda texts: EMBEDDER.embed(list(texts)).tolist(), "fields": ["text"]}
NS = ("users", "alice", "memories")


class State(TypedDict):
    question: str
    memories: list[str]


def recall(state: State, *, store: BaseStore) -> dict:
    found = store.search(NS, query=state["question"], limit=2)
    return {"memories": [item.value["text"] for item in found]}


def receipts(store: BraidlogStore) -> list:
    log = store._braid.log
    return [read_receipt(log, rec.seq) for rec in log.scan_kind(CONTEXT_USED)]


def test_each_search_of_a_graph_records_what_it_returned(tmp_path):
    with BraidlogStore(str(tmp_path / "memory.lmdb"), index=INDEX, receipts=True) as store:
        for key, text in [("coffee", "she drinks her coffee black"), ("dog", "her dog is named Rex"),
                          ("tea", "tea in the evening, never coffee")]:
            store.put(NS, key, {"text": text})
        store.put(NS, "coffee", {"text": "she drinks her coffee black, no sugar"})  # a new version
        graph = StateGraph(State)
        graph.add_node("recall", recall)
        graph.add_edge(START, "recall")
        graph.add_edge("recall", END)
        app = graph.compile(checkpointer=InMemorySaver(), store=store)
        out = app.invoke({"question": "how does she take her coffee?", "memories": []},
                         {"configurable": {"thread_id": "thread-9"}})
        assert out["memories"][0] == "she drinks her coffee black, no sugar"
        (got,) = receipts(store)
        r = got.receipt
        assert (r.run, r.turn) == ("thread-9", "1:recall")
        coffee = [v for v in store.history(NS, "coffee") if v.value is not None][-1]
        assert r.items[0].seq == coffee.seq and r.items[0].delta_id == coffee.id
        assert [i.role for i in r.items] == ["retrieved", "retrieved"] and r.items[0].score > 0
        store.search(NS, limit=1)  # outside a graph, and without a query: recorded too
        outside = receipts(store)[-1].receipt
        assert outside.run == "langgraph" and len(outside.items) == 1 and outside.items[0].score is None


def test_without_receipts_nothing_is_recorded_and_the_flag_is_checked(tmp_path):
    with BraidlogStore(str(tmp_path / "m.lmdb"), index=INDEX) as store:
        store.put(NS, "k", {"text": "hello"})
        store.search(NS, query="hello")
        assert receipts(store) == []
    with pytest.raises(ValidationError, match="receipts"):
        BraidlogStore(str(tmp_path / "m.lmdb"), receipts="yes")
