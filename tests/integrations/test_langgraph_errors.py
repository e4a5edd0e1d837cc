"""Arbitrary values at every public method of BraidlogSaver and BraidlogStore: only a
BraidlogError (or LangGraph's InvalidNamespaceError, for a namespace) escapes, and a call that
raises writes nothing."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langgraph.store.base")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import InvalidNamespaceError

import braidlog
from braidlog.integrations.langgraph import BraidlogSaver, BraidlogStore

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8),
                    st.binary(max_size=8), st.just(object()), st.just(lambda: 1))
anything = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.tuples(inner, inner),
    st.dictionaries(st.one_of(st.text(max_size=5), st.integers()), inner, max_size=3)), max_leaves=6)
names = st.one_of(st.text(max_size=6), st.sampled_from(["t", "a", "", "x.y", "\ud800", "langgraph"]))
configs = st.one_of(anything, st.fixed_dictionaries({"configurable": st.one_of(anything, st.fixed_dictionaries(
    {"thread_id": st.one_of(names, anything)},
    optional={"checkpoint_ns": st.one_of(names, anything), "checkpoint_id": st.one_of(names, anything)}))}))
checkpoints = st.one_of(anything, st.fixed_dictionaries(
    {"v": anything, "id": st.one_of(names, anything), "ts": anything,
     "channel_values": st.one_of(anything, st.dictionaries(names, anything, max_size=3)),
     "channel_versions": st.one_of(anything, st.dictionaries(names, st.one_of(st.integers(), names, anything),
                                                             max_size=3)),
     "versions_seen": anything}))
namespaces = st.one_of(anything, st.tuples(names), st.tuples(names, names), st.lists(names, max_size=3))
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
ALLOWED = (braidlog.BraidlogError, InvalidNamespaceError)


def allowed_or_nothing_written(braid, call):
    before = braid.head().seq
    try:
        out = call()
        if hasattr(out, "__next__"):
            list(out)
    except ALLOWED:
        assert braid.head().seq == before


def test_saver_takes_any_value(tmp_path):
    with BraidlogSaver(str(tmp_path / "saver.lmdb")) as saver:
        calls = st.one_of(
            st.tuples(st.just("put"), configs, checkpoints, anything,
                      st.one_of(anything, st.dictionaries(names, anything))),
            st.tuples(st.just("get_tuple"), configs),
            st.tuples(st.just("list"), st.one_of(st.none(), configs), anything, st.one_of(st.none(), configs),
                      anything),
            st.tuples(st.just("put_writes"), configs,
                      st.one_of(anything, st.lists(st.tuples(names, anything), max_size=2)),
                      st.one_of(names, anything), st.one_of(names, anything)),
            st.tuples(st.just("delete_thread"), st.one_of(names, anything)),
            st.tuples(st.just("delete_for_runs"), anything),
            st.tuples(st.just("prune"), anything, anything),
            st.tuples(st.just("copy_thread"), st.one_of(names, anything), st.one_of(names, anything)),
        )

        @SETTINGS
        @given(calls)
        def run(call):
            name, *args = call
            if name == "list":
                fn = lambda: saver.list(args[0], filter=args[1], before=args[2], limit=args[3])  # noqa: E731  (a one-line callback)
            elif name == "prune":
                fn = lambda: saver.prune(args[0], strategy=args[1])  # noqa: E731  (a one-line callback)
            else:
                fn = lambda: getattr(saver, name)(*args)  # noqa: E731  (a one-line callback)
            allowed_or_nothing_written(saver.braid, fn)
            if name in ("get_tuple", "put", "put_writes"):  # the async side checks the same way
                allowed_or_nothing_written(saver.braid, lambda: asyncio.run(getattr(saver, "a" + name)(*args)))

        run()


def test_store_takes_any_value(tmp_path):
    with BraidlogStore(str(tmp_path / "store.lmdb"), ttl={"refresh_on_read": True}) as store:
        store.put(("seed",), "k", {"v": 1}, ttl=5)
        calls = st.one_of(
            st.tuples(st.just("put"), namespaces, st.one_of(names, anything),
                      st.one_of(anything, st.dictionaries(names, anything, max_size=3)), anything, anything),
            st.tuples(st.just("get"), namespaces, st.one_of(names, anything), anything),
            st.tuples(st.just("search"), namespaces, anything, anything, anything, anything),
            st.tuples(st.just("delete"), namespaces, st.one_of(names, anything)),
            st.tuples(st.just("list_namespaces"), anything, anything, anything, anything, anything),
            st.tuples(st.just("history"), namespaces, st.one_of(names, anything)),
            st.tuples(st.just("at"), st.one_of(anything, st.integers(-3, 30))),
        )

        @SETTINGS
        @given(calls)
        def run(call):
            name, *a = call
            fns = {
                "put": lambda: store.put(a[0], a[1], a[2], a[3], ttl=a[4]),
                "get": lambda: store.get(a[0], a[1], refresh_ttl=a[2]),
                "search": lambda: store.search(a[0], query=a[1], filter=a[2], limit=a[3], offset=a[4]),
                "delete": lambda: store.delete(a[0], a[1]),
                "list_namespaces": lambda: store.list_namespaces(prefix=a[0], suffix=a[1], max_depth=a[2],
                                                                 limit=a[3], offset=a[4]),
                "history": lambda: store.history(a[0], a[1]),
                "at": lambda: store.at(a[0]).search(("seed",)),
            }
            allowed_or_nothing_written(store._braid, fns[name])

        run()
