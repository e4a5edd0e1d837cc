"""A LangGraph StateGraph with deterministic nodes (no model), shared by the LangGraph tests and
the process they start: each turn appends to a list and counts, over three nodes."""

from __future__ import annotations

import operator
import sys
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict):
    notes: Annotated[list[str], operator.add]
    count: int


def plan(state: State) -> dict:
    return {"notes": [f"plan {state['count']}"], "count": state["count"] + 1}


def act(state: State) -> dict:
    return {"notes": [f"act {state['count']}"], "count": state["count"] + 1}


def review(state: State) -> dict:
    return {"notes": [f"review {len(state['notes'])}"]}


def build(checkpointer, store=None, interrupt_before=None):
    g = StateGraph(State)
    g.add_node("plan", plan)
    g.add_node("act", act)
    g.add_node("review", review)
    g.add_edge(START, "plan")
    g.add_edge("plan", "act")
    g.add_edge("act", "review")
    g.add_edge("review", END)
    return g.compile(checkpointer=checkpointer, store=store, interrupt_before=interrupt_before)


def summary(graph, thread: str) -> dict:
    """The thread as JSON: its state, and its history's checkpoint ids and steps, newest first."""
    config = {"configurable": {"thread_id": thread}}
    state = graph.get_state(config)
    history = list(graph.get_state_history(config))
    return {
        "values": state.values,
        "next": list(state.next),
        "checkpoint_id": state.config["configurable"]["checkpoint_id"],
        "history": [[h.config["configurable"]["checkpoint_id"], h.metadata["step"],
                     h.metadata["source"]] for h in history],
    }


if __name__ == "__main__":  # python lg_graph.py STORE THREAD [run|resume]: print the thread, then
    # run a turn or resume it where it was interrupted
    import json

    from braidlog.integrations.langgraph import BraidlogSaver

    with BraidlogSaver(sys.argv[1]) as saver:
        graph = build(saver, interrupt_before=["act"] if sys.argv[3:] == ["resume"] else None)
        before = summary(graph, sys.argv[2])
        if sys.argv[3:] == ["run"]:
            graph.invoke({"notes": ["from the other process"], "count": 100},
                         {"configurable": {"thread_id": sys.argv[2]}})
        elif sys.argv[3:] == ["resume"]:
            graph.invoke(None, {"configurable": {"thread_id": sys.argv[2]}})
        print(json.dumps(before))
