"""The boundary: projection checks run on every delta that enters a Braid, whatever the path.

A small projection, ``claims``, keeps who claimed which name (its state is updated in place, as
the shipped projections do) and declares three rules: a name is claimed once, only a claimed
name is released, and a claim may cite only deltas the log (or its own batch) already holds.
"""

from __future__ import annotations

import json
from datetime import timedelta

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import braidlog
from braidlog import (
    Braid,
    Decider,
    GenericDelta,
    LmdbLog,
    MemoryLog,
    Projection,
    Provenance,
    Refs,
    Rejected,
    ValidationError,
    refuse,
)
from braidlog.replay import encode_state
from tests.support import T0
from tests.support.engine_projections import COUNTS


class Claims(msgspec.Struct):
    owner: dict[str, str] = {}  # name -> delta id of its claim
    released: list[str] = []


def evolve_claims(s: Claims, d: GenericDelta) -> Claims:
    data = d.payload.get("data", {})
    if "claim" in data:
        s.owner.setdefault(data["claim"], d.id)
    elif "release" in data and data["release"] in s.owner:
        del s.owner[data["release"]]
        s.released.append(data["release"])
    return s


SEEN_BY_CHECK: list[tuple[int, int]] = []


def check_claims(s: Claims, d: GenericDelta, at: braidlog.Boundary) -> None:
    SEEN_BY_CHECK.append((at.seq, at.index))
    data = d.payload.get("data", {})
    if "claim" in data:
        name = data["claim"]
        if name in s.owner:
            raise refuse("name-claimed-once", f"{name!r} is already claimed by delta {s.owner[name]}")
        for cited in (d.refs.deltas if d.refs else ()):
            if at.log.get(cited) is None:
                raise ValidationError("refs.deltas", f"cites {cited}, which the log does not hold")
    elif "release" in data and data["release"] not in s.owner:
        raise refuse("release-needs-claim", f"{data['release']!r} is not claimed")


class Claim(msgspec.Struct):
    names: list[str]


def decide_claims(c: Claim, s: Claims, ctx) -> list[GenericDelta]:
    # thin: builds the deltas; the rule that a name is claimed once is the check's
    return [ctx.delta("observation", {"data": {"claim": n}}) for n in c.names]


CLAIMS = Decider("claims", 1, Claims(), evolve_claims, kinds={"observation"},
                 check=check_claims, decide=decide_claims)

_n = iter(range(10**9))


def obs(data: dict, *, refs: Refs | None = None, braid: str = "b") -> GenericDelta:
    i = next(_n)
    return GenericDelta(braid_id=braid, kind="observation", ts=T0 + timedelta(seconds=i),
                        provenance=Provenance("user"), confidence=0.9, payload={"data": data},
                        refs=refs)


def claim(name: str, **kw) -> GenericDelta:
    return obs({"claim": name}, **kw)


@pytest.fixture(params=["memory", "lmdb"])
def braid(request, tmp_path):
    path = None if request.param == "memory" else tmp_path / "store"
    b = braidlog.open(path, projections=[CLAIMS, COUNTS], checkpoint_every=3)
    yield b
    b.close()


def snapshot(b: Braid) -> tuple:
    """The live states as bytes, and the seqs they stand at."""
    return tuple(encode_state(s) for s in b._states), tuple(b._seqs)


def test_append_refuses_a_broken_rule_naming_it_and_writes_nothing(braid):
    braid.append(claim("ada"))
    before, head = snapshot(braid), braid.head()
    with pytest.raises(Rejected) as e:
        braid.append(claim("ada"))
    assert str(e.value).startswith("delta 0: name-claimed-once: 'ada' is already claimed by delta ")
    assert braid.head() == head
    assert snapshot(braid) == before


def test_a_batch_is_checked_delta_by_delta_against_the_earlier_ones(braid):
    braid.append_batch([claim("x"), obs({"release": "x"}), claim("x")])  # each sees the one before
    assert braid.state("claims").owner.keys() == {"x"}
    assert braid.state("claims").released == ["x"]
    before, head = snapshot(braid), braid.head()
    with pytest.raises(Rejected, match=r"^delta 2: name-claimed-once: 'y'"):
        braid.append_batch([claim("y"), claim("z"), claim("y"), claim("w")])
    assert braid.head() == head, "nothing of a refused batch is written"
    assert snapshot(braid) == before, "the live states are as they were"
    assert braid.state("claims").owner.keys() == {"x"}
    assert braid.state("counts").by_kind == {"observation": 3}


def test_a_refused_batch_after_a_checkpoint_boundary_leaves_the_states_as_they_were(braid):
    braid.append_batch([claim("a"), claim("b")])  # checkpoint_every=3: the next batch crosses 3
    before, head = snapshot(braid), braid.head()
    with pytest.raises(Rejected, match="release-needs-claim"):
        braid.append_batch([claim("c"), claim("d"), obs({"release": "nobody"})])
    assert (snapshot(braid), braid.head()) == (before, head)
    assert braid.log.checkpoint_seqs("claims", 1) == []


def test_a_check_sees_the_log_with_the_batch_s_earlier_deltas(braid):
    first = claim("p")
    cites = claim("q", refs=Refs(deltas=(first.id,)))
    braid.append_batch([first, cites])
    with pytest.raises(ValidationError) as e:
        braid.append_batch([claim("r", refs=Refs(deltas=(cites.id, "01J00000000000000000000000"))),
                            claim("s")])
    assert (e.value.index, e.value.field) == (0, "refs.deltas")
    assert str(e.value) == ("delta 0: refs.deltas: cites 01J00000000000000000000000, which the "
                            "log does not hold")


def test_the_check_is_told_the_seq_and_index_each_delta_takes(braid):
    braid.append(claim("one"))
    SEEN_BY_CHECK.clear()
    braid.append_batch([claim("two"), obs({"note": 1}), claim("three")])
    assert SEEN_BY_CHECK == [(2, 0), (3, 1), (4, 2)]


def test_an_idempotent_retry_is_not_checked_again(braid):
    d = claim("once")
    assert braid.append(d) == 1
    assert braid.append(d) == 1  # the same bytes: stored once, not "claimed twice"
    assert braid.append_batch([d, claim("twice")]) == [1, 2]


def test_execute_goes_through_the_same_boundary(braid):
    braid.execute(CLAIMS, Claim(["k"]), braid_id="b", now=T0)
    before, head = snapshot(braid), braid.head()
    with pytest.raises(Rejected, match=r"^delta 1: name-claimed-once: 'k'"):
        braid.execute(CLAIMS, Claim(["j", "k"]), braid_id="b", now=T0)
    assert (snapshot(braid), braid.head()) == (before, head)


def test_execute_under_the_writer_lock_goes_through_the_boundary(tmp_path):
    with braidlog.open(tmp_path / "s", projections=[CLAIMS], retries=0) as b:
        b.execute(CLAIMS, Claim(["k"]), braid_id="b", now=T0)
        with pytest.raises(Rejected, match="name-claimed-once"):
            b.execute(CLAIMS, Claim(["k"]), braid_id="b", now=T0)
        assert b.head().seq == 1


def test_a_raw_store_is_below_the_boundary(braid):
    """The store itself checks shape, schema and chain; a Braid adds its projections' rules."""
    braid.append(claim("dup"))
    braid.log.append(claim("dup"))  # a fact now: evolve never raises on it
    assert braid.state("claims").owner.keys() == {"dup"}


def test_the_live_states_after_boundary_writes_equal_a_fresh_fold(tmp_path):
    with braidlog.open(tmp_path / "s", projections=[CLAIMS, COUNTS], checkpoint_every=4) as b:
        for batch in ([claim("a"), claim("b")], [claim("c")], [claim("a")],
                      [obs({"release": "a"}), claim("a"), claim("d")], [claim("e"), claim("b")]):
            try:
                b.append_batch(batch)
            except Rejected:
                pass
        live = [encode_state(b.state(n)) for n in ("claims", "counts")]
        fresh = [encode_state(p.fold(r.delta for r in b.log.scan())) for p in (CLAIMS, COUNTS)]
        assert live == fresh
        assert b.log.checkpoint_seqs("claims", 1) == [4], "the state at 4, taken as the batch passed it"
        from braidlog.replay import load_checkpoint
        seq, at4 = load_checkpoint(b.log, CLAIMS, 4)
        assert encode_state(at4) == encode_state(CLAIMS.fold(r.delta for r in b.log.scan(1, 5)))
    with braidlog.open(tmp_path / "s", projections=[CLAIMS, COUNTS]) as again:
        assert [encode_state(again.state(n)) for n in ("claims", "counts")] == fresh


def test_a_store_write_that_runs_again_after_the_map_grew_checks_from_where_it_stood(tmp_path):
    """LMDB reruns a write transaction that met a full map: the batch was folded in already."""
    big = [obs({"claim": f"n{i}", "pad": "x" * 4000}) for i in range(400)]
    with Braid(LmdbLog(tmp_path / "s", map_size=1 << 20), [CLAIMS, COUNTS]) as b:
        b.append(claim("first"))
        b.append_batch(big)
        assert b.log.stat()["map_size"] > 1 << 20, "the write ran again after the map grew"
        assert len(b.state("claims").owner) == 401
        assert b.state("counts").by_kind == {"observation": 401}
        fresh = CLAIMS.fold(r.delta for r in b.log.scan())
        assert encode_state(b.state("claims")) == encode_state(fresh)


def test_a_braid_whose_projections_have_no_check_appends_as_the_store_does(tmp_path):
    with braidlog.open(tmp_path / "s", projections=[COUNTS], lazy=True) as b:
        b.append_batch([claim("a"), claim("a")])
        assert b._seqs == [0], "no check to run: the live states are not caught up on write"


def test_a_lazy_braid_catches_up_before_checking(tmp_path):
    with braidlog.open(tmp_path / "s", projections=[CLAIMS]) as b:
        b.append(claim("m"))
    with braidlog.open(tmp_path / "s", projections=[CLAIMS], lazy=True) as b:
        with pytest.raises(Rejected, match="name-claimed-once"):
            b.append(claim("m"))
        b.append(claim("n"))
        assert b.state("claims").owner.keys() == {"m", "n"}


def _store(tmp_path, deltas):
    with braidlog.open(tmp_path / "src", projections=[]) as b:
        b.append_batch(deltas)
    return tmp_path / "src"


def test_import_through_a_braid_obeys_its_checks(tmp_path):
    from braidlog import transfer

    src = _store(tmp_path, [claim("dup"), claim("dup")])  # a bare store takes both
    export = tmp_path / "export.jsonl"
    with LmdbLog(src) as log:
        transfer.export(log, export)
    with braidlog.open(tmp_path / "dst", projections=[CLAIMS]) as b:
        with pytest.raises(Rejected, match=r"^delta 1: name-claimed-once"):
            transfer.import_(b, export)
        assert b.head().seq == 0
        with pytest.raises(Rejected, match="name-claimed-once"):
            transfer.import_(b, export, as_new=True)
        assert b.head().seq == 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(st.tuples(st.sampled_from(["claim", "release"]),
                                            st.sampled_from("abcd")), min_size=1, max_size=4),
                        min_size=1, max_size=8))
def test_every_refusal_leaves_states_and_log_as_they_were(batches):
    """Arbitrary batches: each is written whole or not at all; the live states always equal a
    fresh fold of the log, and a refused batch is exactly a batch a fold of it would break."""
    with Braid(MemoryLog(), [CLAIMS, COUNTS], checkpoint_every=2) as b:
        for batch in batches:
            deltas = [obs({op: name}) for op, name in batch]
            before, head = snapshot(b), b.head()
            trial = msgspec.convert(msgspec.to_builtins(b.state("claims")), Claims)
            breaks = False
            for d in deltas:
                try:
                    check_claims(trial, d, braidlog.Boundary(0, 0, None))
                except Rejected:
                    breaks = True
                    break
                evolve_claims(trial, d)
            try:
                b.append_batch(deltas)
                assert not breaks
            except Rejected:
                assert breaks
                assert (snapshot(b), b.head()) == (before, head)
            fresh = CLAIMS.fold(r.delta for r in b.log.scan())
            assert encode_state(b.state("claims")) == encode_state(fresh)


def test_cli_append_and_import_obey_the_store_s_projection_checks(tmp_path, capsys):
    """The CLI opens the store with the projections it is used with (the shipped ones for a new
    store): their rules hold on `append` and `import` as on Braid.append."""
    from braidlog.cli import main

    store = tmp_path / "cli"
    assert main(["--store", str(store), "init"]) == 0
    bead = {"braid_id": "b", "kind": "bead_version", "ts": "2026-01-01T00:00:00Z",
            "provenance": {"kind": "assistant"}, "confidence": 0.8,
            "payload": {"bead_id": "r1", "bead_version_id": "r1v1", "bead_type": "reasoning_bead",
                        "version": 1, "name": "thought",
                        "reasoning": {"narrative": "I thought.", "raw_cot": "step 1, step 2"}}}
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(bead))
    capsys.readouterr()
    assert main(["--store", str(store), "append", str(f)]) != 0
    assert "raw-cot-behind-flag" in capsys.readouterr().err
    with LmdbLog(store, create=False) as log:
        assert log.head().seq == 0

    src = tmp_path / "src"
    with braidlog.open(src, projections=[]) as bare:  # a bare store takes it
        bare.append(braidlog.from_json(json.dumps(bead).encode()))
    export = tmp_path / "export.jsonl"
    assert main(["--store", str(src), "export", str(export)]) == 0
    capsys.readouterr()
    assert main(["--store", str(tmp_path / "dst"), "import", str(export)]) != 0
    assert "raw-cot-behind-flag" in capsys.readouterr().err
    assert not (tmp_path / "dst").exists(), "a refused import into a new store leaves nothing"


@pytest.mark.parametrize("seed", range(3))
def test_each_delta_is_checked_by_every_projection_that_reads_it_in_their_order(seed):
    """Reads declared every way (kinds, refs by field, provenance, all three, none, every
    delta) against deltas with no refs, empty refs, each ref field, dream or not: the boundary
    runs the check of each projection that reads a delta (``Projection.reads``), in the
    projections' order, each against its state before the delta, and folds the delta into
    exactly those states; a projection without a check is folded all the same."""
    import random

    rng = random.Random(seed)
    bead = (braidlog.BeadRef("bead-1", "used"),)
    calls: list[tuple[str, str, int]] = []

    def evolve(s: list, d: GenericDelta) -> list:
        s.append(d.id)
        return s

    def checker(name):
        def check(s: list, d: GenericDelta, at: braidlog.Boundary) -> None:
            calls.append((name, d.id, len(s)))
        return check

    declared = [dict(kinds=None), dict(kinds={"tick"}), dict(kinds={"tick"}, refs={"beads"}),
                dict(kinds=set(), refs={"deltas", "beads"}), dict(kinds={"observation"},
                provenances={"dream"}), dict(kinds=set(), refs={"deltas"}, provenances={"dream"}),
                dict(kinds=set()), dict(kinds={"message"}, refs={"knots"})]
    ps = [Projection(f"p{n}", 1, [], evolve, check=checker(f"p{n}") if n != 5 else None, **reads)
          for n, reads in enumerate(declared)]
    deltas: list[GenericDelta] = []
    for i in range(90):
        cited = (deltas[rng.randrange(len(deltas))].id,) if deltas else ()
        refs = rng.choice([None, Refs(), Refs(beads=bead), Refs(deltas=cited),
                           Refs(beads=bead, deltas=cited), Refs(knots=("k",))])
        kind = rng.choice(["tick", "message", "observation"])
        payload = {"tick": {}, "message": {"text": f"m{i}"}, "observation": {"text": "o"}}[kind]
        deltas.append(GenericDelta(braid_id="b", kind=kind, ts=T0 + timedelta(seconds=i),
                                   provenance=Provenance(rng.choice(["user", "dream", "tool"])),
                                   confidence=0.5, payload=payload, refs=refs))
    braid = Braid(MemoryLog(), ps)
    for at in range(0, len(deltas), 30):
        braid.append_batch(deltas[at:at + 30])
    seen = {p.name: [] for p in ps}
    want = []
    for d in deltas:
        for p in ps:
            if p.reads(d):
                if p.check is not None:
                    want.append((p.name, d.id, len(seen[p.name])))
                seen[p.name].append(d.id)
    assert calls == want
    for p in ps:
        assert braid.state(p.name) == seen[p.name], p.name
