"""The example of docs/langgraph.md as a script, so the shell part of that page has a store to
look at: ``python -m braidlog.integrations.langgraph.example agent.lmdb`` runs the graph,
forks it from an earlier checkpoint and resumes the fork, on the store at that path."""

from __future__ import annotations

import operator
import sys
from typing import Annotated, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from braidlog.integrations.langgraph import BraidlogSaver, BraidlogStore


class State(TypedDict):
    notes: Annotated[list[str], operator.add]
    count: int


def plan(state: State) -> dict:
    return {"notes": [f"plan {state['count']}"], "count": state["count"] + 1}


def act(state: State, *, store: BaseStore) -> dict:
    store.put(("agent", "memory"), "last", {"note": f"acted on {state['notes'][-1]}"})
    return {"notes": [f"act {state['count']}"], "count": state["count"] + 1}


def run(path: str) -> None:
    builder = StateGraph(State)
    builder.add_node("plan", plan)
    builder.add_node("act", act)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "act")
    builder.add_edge("act", END)

    saver = BraidlogSaver(path)                  # a new store is created there when missing
    store = BraidlogStore(saver.braid)           # the same log holds the threads and the memory
    graph = builder.compile(checkpointer=saver, store=store)

    config: RunnableConfig  # (declared apart: the page shows the lines below)
    config = {"configurable": {"thread_id": "1"}}
    graph.invoke({"notes": ["start"], "count": 0}, config)
    graph.invoke({"notes": ["again"], "count": 10}, config)
    assert graph.get_state(config).values["count"] == 12

    # the thread's history, newest first: every checkpoint, read back as it was
    history: list  # of StateSnapshot, whose metadata may be None: every checkpoint here has some
    history = list(graph.get_state_history(config))
    assert [h.metadata["step"] for h in history] == [6, 5, 4, 3, 2, 1, 0, -1]
    before_act = next(h for h in history if h.next == ("act",) and h.values["count"] == 1)

    # fork: change the past as if plan had written something else, then resume from there
    fork = graph.update_state(before_act.config, {"notes": ["a better plan"]}, as_node="plan")
    forked = graph.invoke(None, fork)
    assert forked["notes"] == ["start", "plan 0", "a better plan", "act 1"]
    assert graph.get_state(config).values == forked  # the thread now continues from the fork

    # the memory the act node wrote, every version of it
    versions = store.history(("agent", "memory"), "last")
    assert [v.value["note"] for v in versions if v.value is not None] == [
        "acted on plan 0", "acted on plan 10", "acted on a better plan"]
    first = store.at(versions[0].seq).get(("agent", "memory"), "last")
    assert first is not None and first.value == versions[0].value
    saver.close()


if __name__ == "__main__":
    run(sys.argv[1] if len(sys.argv) > 1 else "agent.lmdb")
