"""Arbitrary values at every parameter of every public append and command entry point: what
escapes is a BraidlogError, and a refused call leaves the log as it was.

The entry points: ``Braid.append``, ``append_batch`` and ``execute`` with every command of
every shipped projection, a store's ``append``, ``append_batch`` and ``commit`` (memory and
LMDB), and opening a store (``braidlog.open``, ``LmdbLog``). Values are drawn from everything a
caller can pass: wrong types, NaN and infinities, integers past 64 bits, naive and aware times,
bytes, lone surrogates, deep and odd containers, and, for command fields, values of the type the
field declares, so that decide runs too. Examples per test are few enough for the default run;
``BRAIDLOG_PROPERTY_EXAMPLES`` raises them for a longer hunt.
"""

from __future__ import annotations

import importlib
import inspect
import os
import typing
from datetime import UTC, datetime

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument, ResolutionFailed

import braidlog
from braidlog import BraidlogError, Command, GenericDelta, LmdbLog, MemoryLog, Provenance, Refs
from braidlog.projections import FAMILIES

EXAMPLES = int(os.environ.get("BRAIDLOG_PROPERTY_EXAMPLES", "40"))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])

T0 = datetime(2026, 1, 1, tzinfo=UTC)

texts = st.text(max_size=12) | st.sampled_from(["", "\ud800", "a\udfff", "b1", "x" * 200,
                                                 "01ARZ3NDEKTSV4RRFFQ69G5FAV", "user", "message"])
scalars = (st.none() | st.booleans() | st.integers() | st.integers(-2**70, 2**70)
           | st.floats() | texts | st.binary(max_size=8)
           | st.datetimes() | st.datetimes(timezones=st.just(UTC))
           | st.just(object()) | st.just(float("nan")) | st.just(2**64))
anything = st.recursive(
    scalars,
    lambda inner: (st.lists(inner, max_size=3) | st.tuples(inner, inner)
                   | st.dictionaries(texts | st.integers(), inner, max_size=3)
                   | st.frozensets(st.integers(), max_size=2)),
    max_leaves=8)


class Nested(list):
    """A list nested ``depth`` deep, shown short (hypothesis prints what it draws)."""

    def __init__(self, depth: int) -> None:
        inner: list = []
        for _ in range(depth - 1):
            inner = [inner]
        super().__init__([inner])
        self.depth = depth

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(f"Nested({self.depth})")


class Cyclic(dict):
    """A dict that holds itself."""

    def __init__(self) -> None:
        super().__init__(a=1)
        self["self"] = self

    def _repr_pretty_(self, p, cycle) -> None:
        p.text("Cyclic()")


odd = st.sampled_from([Nested(17), Nested(3000)]) | st.builds(Cyclic)
values = anything | odd

provenances = st.sampled_from(braidlog.PROVENANCE_KINDS).map(Provenance) | st.builds(
    Provenance, kind=values, source=values)
refs = st.none() | st.builds(Refs, deltas=values) | st.builds(Refs, beads=values, knots=values)


@st.composite
def deltas(draw) -> GenericDelta:
    """A GenericDelta whose every field may be anything (the constructor checks nothing)."""
    good = draw(st.booleans())
    return GenericDelta(
        id=draw(st.just(braidlog.new_id()) | values),
        braid_id=draw(st.just("b1") | values) if good else draw(values),
        kind=draw(st.sampled_from(["message", "observation", "tick", "nope"]) | values),
        ts=draw(st.just(T0) | values),
        provenance=draw(provenances | values),
        confidence=draw(st.floats(0, 1) | values),
        payload=draw(st.dictionaries(texts, values, max_size=3) | values),
        refs=draw(refs | values),
        tags=draw(st.tuples(texts) | values),
        vector=draw(st.none() | st.none() | values),
    )


batches = st.lists(deltas(), max_size=3) | values | deltas()
versions = st.none() | st.integers(-1, 3) | values
heads = st.none() | st.integers(-1, 5) | values


def only_braidlog_errors(log, call) -> None:
    """``call()`` returns or raises a BraidlogError; when it raises, the log is unchanged."""
    head = log.head()
    try:
        call()
    except BraidlogError:
        assert log.head() == head, "a refused call wrote something"


# -- stores ----------------------------------------------------------------------------------

@pytest.fixture(params=["memory", "lmdb"])
def store(request, tmp_path):
    log = MemoryLog() if request.param == "memory" else LmdbLog(tmp_path / "store")
    yield log
    log.close()


@PROPERTY
@given(data=st.data())
def test_store_appends(store, data):
    which = data.draw(st.sampled_from(["append", "append_batch", "commit"]))
    if which == "append":
        d, version = data.draw(deltas() | values), data.draw(versions)
        only_braidlog_errors(store, lambda: store.append(d, expected_version=version))
    else:
        batch, version, head = data.draw(batches), data.draw(versions), data.draw(heads)
        call = getattr(store, which)
        only_braidlog_errors(store, lambda: call(batch, expected_version=version, expected_head=head))


# -- the facade and every command -------------------------------------------------------------

def commands() -> list[tuple[str, type]]:
    """(decider name, command class) of every Command in every shipped family."""
    found = set()
    for family in FAMILIES:
        module = importlib.import_module(f"braidlog.projections.{family}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (issubclass(cls, Command) and cls.__module__.startswith(module.__name__)
                    and cls.__struct_fields__):
                found.add((family, cls))
    return sorted(found, key=lambda fc: (fc[0], fc[1].__name__))


COMMANDS = commands()


def typed(annotation: typing.Any) -> st.SearchStrategy:
    """Values of the type a field declares (constraints aside), or anything when hypothesis
    cannot build that type."""
    try:
        strategy = st.from_type(annotation)
        strategy.validate()
    except Exception:  # any exception: a type hypothesis cannot build: draw anything
        return anything

    @st.composite
    def values_of_the_type(draw):
        try:
            return draw(strategy)
        except (BraidlogError, InvalidArgument, ResolutionFailed):
            # a nested command refused what was drawn for it, or a type inside it (Any) has no
            # strategy of its own
            return draw(anything)

    return values_of_the_type()


@st.composite
def command_kwargs(draw, cls: type) -> dict[str, typing.Any]:
    hints = typing.get_type_hints(cls, include_extras=False)
    kwargs = {}
    for field in msgspec.structs.fields(cls):
        if not field.required and draw(st.booleans()):
            continue  # leave it at its default
        kwargs[field.name] = draw(typed(hints.get(field.name, typing.Any)) | values)
    if draw(st.integers(0, 9)) == 0:
        kwargs[draw(st.sampled_from(["priority", "zz"]))] = draw(values)
    if kwargs and draw(st.integers(0, 9)) == 0:
        kwargs.pop(next(iter(kwargs)))
    return kwargs


@pytest.fixture(scope="module")
def braid(tmp_path_factory):
    b = braidlog.open(tmp_path_factory.mktemp("braid") / "store", checkpoint_every=10_000)
    yield b
    b.close()


@PROPERTY
@given(data=st.data())
def test_braid_append(braid, data):
    if data.draw(st.booleans()):
        d, version = data.draw(deltas() | values), data.draw(versions)
        only_braidlog_errors(braid, lambda: braid.append(d, expected_version=version))
    else:
        batch, version, head = data.draw(batches), data.draw(versions), data.draw(heads)
        only_braidlog_errors(braid, lambda: braid.append_batch(batch, expected_version=version,
                                                               expected_head=head))


@pytest.mark.parametrize("family, cls", COMMANDS, ids=[f"{f}.{c.__name__}" for f, c in COMMANDS])
def test_execute_every_command(braid, family, cls):
    @PROPERTY
    @given(kwargs=command_kwargs(cls), decider=st.just(family) | values,
           braid_id=st.just("b1") | values, provenance=st.sampled_from(["system", "user"]) | values,
           now=st.none() | st.just(T0) | values, confidence=st.just(1.0) | values,
           version=st.none() | values)
    def check(kwargs, decider, braid_id, provenance, now, confidence, version):
        def call():
            command = cls(**kwargs)
            braid.execute(decider, command, braid_id=braid_id, provenance=provenance, now=now,
                          confidence=confidence, expected_version=version)
        only_braidlog_errors(braid, call)

    check()


# -- opening ------------------------------------------------------------------------------------

paths = st.sampled_from(["store", "a/b", "x\ud800", "", ".", "store/data.mdb"]) | values
options = st.fixed_dictionaries({}, optional={
    "durable": values, "readonly": values, "create": values, "checkpoint_every": values,
    "retries": values, "lazy": values, "projections": st.just([]) | values,
    "map_size": st.integers(-1, 2**40) | values,
})


@PROPERTY
@given(path=paths, kwargs=options, low_level=st.booleans())
def test_open(tmp_path, path, kwargs, low_level):
    if isinstance(path, str):
        path = tmp_path / path  # never outside this test's directory
    if low_level:
        kwargs = {k: v for k, v in kwargs.items() if k in ("durable", "readonly", "create", "map_size")}
    try:
        store = LmdbLog(path, **kwargs) if low_level else braidlog.open(path, **kwargs)
    except BraidlogError:
        return
    store.close()


# ------------------------------------------------------------- parameters added for shell users

@settings(max_examples=60, deadline=None)
@given(refers=st.one_of(st.none(), st.text(), st.integers(), st.lists(st.one_of(st.text(), st.integers(), st.none()))),
       text=st.one_of(st.none(), st.text(), st.lists(st.text())))
def test_declare_kind_refers_and_text_raise_only_braidlog_errors(refers, text):
    from braidlog.kind_schema import declare_kind

    with braidlog.open(None, projections=[]) as b:
        schema = {"type": "object", "properties": {"a": {"type": "string"}}}
        only_braidlog_errors(b.log, lambda: declare_kind(b, "k1", schema, refers=refers, text=text))


@settings(max_examples=60, deadline=None)
@given(min_score=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.text(),
                           st.booleans(), st.integers()))
def test_recall_min_score_raises_only_braidlog_errors(min_score):
    pytest.importorskip("hnswlib")
    from braidlog.recall import Recall

    log = braidlog.MemoryLog()
    log.append(braidlog.delta("b", "message", {"text": "hello"},
                              vector=braidlog.Vector.of([1.0, 0.0, 0.0, 0.0])))
    r = Recall(log)
    only_braidlog_errors(log, lambda: r.recall([1.0, 0.0, 0.0, 0.0], 3, min_score=min_score))
