"""The facade: execute, live projections, checkpoints, time travel, racing writers."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from datetime import timedelta

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import braidlog
from braidlog import CheckpointWarning, Rejected, ValidationError
from braidlog.replay import encode_state
from tests.support import T0, make_delta, random_deltas
from tests.support.engine_projections import COUNTER, COUNTS, SEEN, TALLY, Counter, Increment, evolve_counts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def open_braid(path, **kw):
    kw.setdefault("projections", [COUNTS, TALLY, COUNTER])
    return braidlog.open(path, **kw)


@pytest.fixture(params=["memory", "lmdb"])
def braid(request, tmp_path):
    b = open_braid(None if request.param == "memory" else tmp_path / "store", checkpoint_every=4)
    yield b
    b.close()


def test_execute_appends_what_decide_returns(braid):
    recs = braid.execute(COUNTER, Increment(), braid_id="c", now=T0)
    assert [r.seq for r in recs] == [1]
    assert recs[0].delta.ts == T0 and recs[0].delta.braid_id == "c"
    assert braid.state("counter") == Counter(1)
    braid.execute("counter", Increment(), braid_id="c", now=T0, provenance="assistant")
    assert braid.state("counter") == Counter(2)
    assert braid.log.read(2).delta.provenance.kind == "assistant"


def test_a_command_already_done_appends_nothing(braid):
    braid.execute(COUNTER, Increment(expected_value=0), braid_id="c")
    assert braid.execute(COUNTER, Increment(expected_value=0), braid_id="c") == []
    assert braid.head().seq == 1


def test_a_refusal_propagates_and_appends_nothing(braid):
    braid.execute(COUNTER, Increment(), braid_id="c")
    with pytest.raises(Rejected, match="limit 1"):
        braid.execute(COUNTER, Increment(limit=1), braid_id="c")
    assert braid.head().seq == 1


def test_execute_checks_its_arguments(braid):
    with pytest.raises(ValidationError, match="not a Decider"):
        braid.execute(COUNTS, Increment(), braid_id="c")
    with pytest.raises(ValidationError, match="unknown provenance kind 'robot'"):
        braid.execute(COUNTER, Increment(), braid_id="c", provenance="robot")
    with pytest.raises(ValidationError, match="unknown provenance kind"):  # a lone surrogate
        braid.execute(COUNTER, Increment(), braid_id="c", provenance="\ud800")
    with pytest.raises(ValidationError, match="now"):
        braid.execute(COUNTER, Increment(), braid_id="c", now=T0.replace(tzinfo=None))
    with pytest.raises(ValidationError, match="no projection 'nope'"):
        braid.state("nope")
    assert braid.head().seq == 0


def test_stale_head_is_retried_after_catching_up(tmp_path):
    path = tmp_path / "store"
    a, b = open_braid(path), open_braid(path)
    a.execute(COUNTER, Increment(), braid_id="c")
    # b's live state is behind; execute catches up, so it decides on value 1, not 0
    b.execute(COUNTER, Increment(), braid_id="c")
    assert [r.delta.payload["data"]["value"] for r in b.log.scan()] == [1, 2]
    a.close(), b.close()


def test_after_stale_heads_it_decides_under_the_writer_lock(tmp_path):
    log = braidlog.LmdbLog(tmp_path / "store")
    calls = []

    def racing_decide(cmd, state, ctx):
        calls.append(ctx.head)
        if len(calls) <= 2:  # another writer gets in first during both optimistic attempts
            log.append(make_delta(len(calls), braid="other"))
        return [ctx.delta("observation", {"text": "x", "data": {"seen": state.value}})]

    def count(s, d):
        return Counter(s.value + 1)

    racing = braidlog.Decider("racing", 1, Counter(), count, decide=racing_decide)
    b = braidlog.Braid(log, [racing], retries=2)
    recs = b.execute(racing, Increment(), braid_id="c")
    assert calls == [0, 1, 2], "two optimistic attempts, then one under the lock"
    assert [r.seq for r in recs] == [3]
    assert recs[0].delta.payload["data"]["seen"] == 2, "decided on the state at the true head"
    b.close()


@pytest.mark.slow
def test_two_writer_processes_racing_lose_no_update(tmp_path):
    path = str(tmp_path / "store")
    open_braid(path).close()
    code = f"""
import sys
sys.path.insert(0, {ROOT!r})
import braidlog
from tests.support.engine_projections import COUNTER, Increment
b = braidlog.open({path!r}, projections=[COUNTER], durable=False)
for _ in range(60):
    b.execute(COUNTER, Increment(), braid_id="race")
b.close()
"""
    procs = [subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    with braidlog.LmdbLog(path) as log:
        values = [r.delta.payload["data"]["value"] for r in log.scan_kind("observation")]
    assert values == list(range(1, 121)), "two writers decided on the same state"


def test_time_travel_by_seq_id_and_time(braid):
    ds = [make_delta(i) for i in range(6)]
    braid.append_batch(ds)
    assert braid.at(0).state("counts").by_kind == {}
    assert braid.at(3).state("counts").by_kind == {"message": 3}
    assert braid.at(ds[4].id).state("counts").by_kind == {"message": 5}
    assert braid.resolve(ds[4].id.lower()) == 5
    assert braid.resolve(T0 + timedelta(seconds=2, milliseconds=500)) == 3
    assert braid.at(T0 - timedelta(days=1)).seq == 0
    with pytest.raises(ValidationError, match="outside the log"):
        braid.at(7)
    with pytest.raises(ValidationError, match="no delta with id"):
        braid.at("01ARZ3NDEKTSV4RRFFQ69G5FAV")
    with pytest.raises(ValidationError, match="timezone-aware"):
        braid.at(T0.replace(tzinfo=None))


def test_a_view_is_read_only_and_stops_at_its_seq(braid):
    braid.append_batch([make_delta(i) for i in range(5)])
    view = braid.at(3)
    assert [r.seq for r in view.log.scan()] == [1, 2, 3]
    assert [r.seq for r in view.log.scan_braid("b1", reverse=True)] == [3, 2, 1]
    assert view.log.get(braid.log.read(5).delta.id) is None
    assert view.log.braid_head("b1") == (3, 3)
    assert view.head() == (3, braid.log.hash_at(3))
    assert not hasattr(view, "append") and not hasattr(view.log, "append")
    head = braid.head()
    view.state("counts"), view.state("tally")
    assert braid.head() == head
    if isinstance(braid.log, braidlog.LmdbLog):
        keys = braid.log.checkpoint_keys()
        braid.at(2).state("counts")
        assert braid.log.checkpoint_keys() == keys, "reading a view wrote a checkpoint"


def test_checkpoints_are_written_every_n_and_on_close(tmp_path):
    path = tmp_path / "store"
    b = open_braid(path, checkpoint_every=4)
    b.append_batch([make_delta(i) for i in range(10)])
    b.state("counts")
    assert b.log.checkpoint_seqs("counts", 1) == [4, 8]
    b.close()
    b = open_braid(path, checkpoint_every=4)
    assert b.log.checkpoint_seqs("counts", 1) == [4, 8, 10]
    assert b._seqs == [10, 10, 10]
    b.close()


def _checkpoint_blob(log, name, seq):
    from braidlog.replay import Checkpoint

    return msgspec.msgpack.decode(log.get_checkpoint(name, 1, seq), type=Checkpoint)


@pytest.mark.parametrize("damage, why", [
    ("digest", "its content does not match its hash"),
    ("chain", "the chain hash it covers differs from the log's"),
])
def test_a_bad_checkpoint_is_ignored_with_a_reason_and_rebuilt(tmp_path, damage, why):
    from braidlog.replay import Checkpoint

    path = tmp_path / "store"
    b = open_braid(path, checkpoint_every=1000)
    b.append_batch([make_delta(i) for i in range(6)])
    expected = encode_state(b.state("counts"))
    b.close()
    log = braidlog.LmdbLog(path)
    ck = _checkpoint_blob(log, "counts", 6)
    if damage == "digest":
        ck = Checkpoint(ck.seq, ck.chain, encode_state(msgspec.msgpack.decode(ck.state)) + b"", b"\0" * 32)
    else:
        ck = Checkpoint.make(ck.seq, b"\1" * 32, encode_state(braidlog.replay.decode_state(COUNTS, ck.state)))
    log.put_checkpoint("counts", 1, 6, msgspec.msgpack.encode(ck))
    log.close()
    with pytest.warns(CheckpointWarning, match=why):
        b = open_braid(path)
    assert any(why in n for n in b.notices)
    assert encode_state(b.state("counts")) == expected
    b.close()


def test_checkpoints_of_an_older_projection_version_are_ignored_and_said(tmp_path):
    path = tmp_path / "store"
    b = open_braid(path)
    b.append_batch([make_delta(i) for i in range(3)])
    b.close()
    counts_v2 = braidlog.Projection("counts", 2, COUNTS.initial, COUNTS.evolve)
    with pytest.warns(CheckpointWarning, match=r"counts v1 ignored: the projection is now v2"):
        b = braidlog.open(path, projections=[counts_v2])
    assert b.state("counts").by_kind == {"message": 3}
    b.close()


# -- the invariant ------------------------------------------------------------------------------

def fresh(projection, deltas):
    return encode_state(projection.fold(deltas))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40), every=st.integers(1, 9),
       reopen_at=st.integers(0, 40), store=st.sampled_from(["memory", "lmdb"]))
def test_at_k_equals_a_fresh_fold_and_the_live_state_after_k(tmp_path_factory, seed, n, every, reopen_at, store):
    import random

    deltas = random_deltas(random.Random(seed), n)
    path = None if store == "memory" else tmp_path_factory.mktemp("inv") / "store"
    projections = [COUNTS, TALLY, COUNTER, SEEN]  # SEEN: positional, reads by refs and provenance
    with warnings.catch_warnings():
        warnings.simplefilter("error", CheckpointWarning)
        b = open_braid(path, checkpoint_every=every, projections=projections)
        live = {p.name: [encode_state(p.start())] for p in projections}
        for k, d in enumerate(deltas, 1):
            b.append(d)
            for p in projections:
                live[p.name].append(encode_state(b.state(p.name)))
            if path is not None and k == reopen_at:
                b.close()
                b = open_braid(path, checkpoint_every=every, projections=projections)
        for attempt in range(2 if path is not None else 1):
            for k in range(n + 1):
                view = b.at(k)
                for p in projections:
                    got = encode_state(view.state(p.name))
                    assert got == fresh(p, deltas[:k]) == live[p.name][k], (p.name, k)
            if path is not None and attempt == 0:
                b.close()
                b = open_braid(path, checkpoint_every=every, projections=projections)
        b.close()


def test_a_read_only_braid_catches_up_without_writing(tmp_path):
    path = tmp_path / "store"
    with braidlog.LmdbLog(path) as log:
        log.append_batch([make_delta(i) for i in range(12)])
    b = open_braid(path, readonly=True, checkpoint_every=5)
    assert b.state("counts").by_kind == {"message": 12}
    assert b.at(7).state("counts").by_kind == {"message": 7}
    b.close()
    with braidlog.LmdbLog(path) as log:
        assert log.checkpoint_keys() == []


def test_a_lazy_braid_folds_nothing_until_a_live_state_is_asked_for(tmp_path):
    path = tmp_path / "store"
    with braidlog.LmdbLog(path) as log:  # no checkpoints: catching up means folding everything
        log.append_batch([make_delta(i) for i in range(12)])
    calls = []

    def evolve(state, d):
        calls.append(d.id)
        return evolve_counts(state, d)

    counting = braidlog.Projection("counts", 1, COUNTS.initial, evolve)
    b = braidlog.open(path, projections=[counting], readonly=True, lazy=True)
    assert calls == [] and b.seq == 0
    assert b.at(5).state("counts").by_kind == {"message": 5} and len(calls) == 5
    assert b.state("counts").by_kind == {"message": 12} and b.seq == 12
    b.close()
    eager = braidlog.open(path, projections=[COUNTS], readonly=True)
    assert eager.seq == 12
    eager.close()
    calls.clear()
    writable = braidlog.open(path, projections=[counting], lazy=True, checkpoint_every=5)
    assert writable.at(3).state("counts").by_kind == {"message": 3}
    writable.close()  # never caught up: closing folds nothing and writes no checkpoint
    assert len(calls) == 3
    with braidlog.LmdbLog(path) as log:
        assert log.checkpoint_keys() == []


def test_catch_up_reports_progress_and_checkpoints_each_boundary(tmp_path):
    b = open_braid(tmp_path / "store", checkpoint_every=5)
    b.log.append_batch([make_delta(i) for i in range(12)])
    seen = []
    assert b.catch_up(progress=seen.append) == 12
    assert seen[-1] == 12 and seen == sorted(seen)
    assert b.log.checkpoint_seqs("counts", 1) == [5, 10]
    b.close()


def test_a_damaged_checkpoint_is_replaced_when_rewritten(tmp_path):
    from braidlog.replay import Checkpoint

    path = tmp_path / "store"
    b = open_braid(path)
    b.append_batch([make_delta(i) for i in range(4)])
    b.close()
    log = braidlog.LmdbLog(path)
    ck = _checkpoint_blob(log, "counts", 4)
    log.put_checkpoint("counts", 1, 4, msgspec.msgpack.encode(Checkpoint(ck.seq, ck.chain, ck.state, b"\0" * 32)))
    log.close()
    with pytest.warns(CheckpointWarning):
        b = open_braid(path)
    b.close()  # checkpoints again at the head: the damaged blob is replaced
    with warnings.catch_warnings():
        warnings.simplefilter("error", CheckpointWarning)
        b = open_braid(path)
    assert b.notices == []
    b.close()


def test_open_closes_the_store_when_the_braid_cannot_start(tmp_path):
    path = tmp_path / "store"
    with pytest.raises(ValidationError, match="two projections"):
        braidlog.open(path, projections=[COUNTS, COUNTS])
    braidlog.open(path, projections=[COUNTS]).close()  # not left open behind the caller's back


def test_a_cancelled_rebuild_leaves_no_delta_counted_twice(tmp_path):
    path = tmp_path / "store"
    b = open_braid(path, checkpoint_every=10**6)
    b.log.append_batch([make_delta(i) for i in range(50_000)])
    b.catch_up()
    expected = encode_state(b.state("counts"))

    def cancel(done):
        if done:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        b.rebuild(progress=cancel)
    assert encode_state(b.state("counts")) == expected
    b.close()
    b = open_braid(path)
    assert encode_state(b.state("counts")) == expected
    b.close()


@pytest.mark.parametrize("kind, provenance, payload, expected", [
    ("message", "user", {"text": "hi"}, 0.7),
    ("message", "tool", {"text": "hi"}, 0.7),
    ("message", "assistant", {"text": "hi"}, 0.6),
    ("message", "system", {"text": "hi"}, 0.6),
    ("message", "perception", {"text": "hi"}, 0.6),
    ("tool_call", "assistant", {"tool": "search"}, 0.6),
    ("tool_result", "tool", {"tool": "search", "ok": True}, 0.7),
    ("tool_result", "tool", {"tool": "search"}, 0.7),
    ("tool_result", "tool", {"tool": "search", "ok": False}, 0.4),
    ("observation", "perception", {}, 1.0),
    ("message", "dream", {"text": "hi"}, 0.3),
    ("observation", "dream", {}, 0.3),
])
def test_a_delta_without_a_confidence_gets_its_kind_s_default_stored_in_it(kind, provenance, payload, expected):
    d = braidlog.delta("b", kind, payload, provenance=provenance, ts=T0)
    assert d.confidence == expected
    ctx = braidlog.Context(now=T0, braid_id="b", provenance=braidlog.Provenance(provenance))
    assert ctx.delta(kind, payload).confidence == expected
    with braidlog.open(None, projections=[]) as b:
        seq = b.append(d)
        assert b.log.read(seq).delta.confidence == expected   # the log says what was assumed


def test_an_explicit_confidence_is_kept(braid):
    assert braidlog.delta("b", "message", {"text": "x"}, confidence=0.95, ts=T0).confidence == 0.95
    assert braidlog.delta("b", "tool_result", {"tool": "t", "ok": False}, confidence=1.0,
                          ts=T0).confidence == 1.0
    ctx = braidlog.Context(now=T0, braid_id="b", confidence=0.2)
    assert ctx.delta("message", {"text": "x"}).confidence == 0.2
    recs = braid.execute(COUNTER, Increment(), braid_id="c", now=T0)   # an observation: 1.0
    assert recs[0].delta.confidence == 1.0
    recs = braid.execute(COUNTER, Increment(), braid_id="c", now=T0, confidence=0.5)
    assert recs[0].delta.confidence == 0.5
