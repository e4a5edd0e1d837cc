"""Folds: what a projection reads, the positions a positional evolve gets, folds in parts."""

from __future__ import annotations

import random
import warnings

import msgspec
import pytest

import braidlog
from braidlog import BeadRef, CheckpointWarning, GenericDelta, MemoryLog, Projection, Provenance, Refs
from braidlog.replay import encode_state, fold
from tests.support import T0, random_deltas
from tests.support.engine_projections import COUNTS, SEEN, TALLY


def delta(kind="message", provenance="user", refs=None, i=0) -> GenericDelta:
    payload = {"tick": {}, "message": {"text": f"m{i}"}, "observation": {"text": "o"}}[kind]
    return GenericDelta(braid_id="b1", kind=kind, ts=T0, provenance=Provenance(provenance),
                        confidence=1.0, payload=payload, refs=refs)


def expected_seen(deltas, after=0, stop=None):
    """[seq, kind, id] of each delta in (after, stop] that SEEN reads, by its own rules."""
    out = []
    for seq, d in enumerate(deltas, 1):
        if after < seq <= (stop if stop is not None else len(deltas)):
            cites = d.refs is not None and bool(d.refs.deltas)
            if d.kind == "tick" or cites or d.provenance.kind == "dream":
                out.append([seq, d.kind, d.id])
    return out


# -- what a projection reads ----------------------------------------------------------------------

def test_reads_is_kinds_or_refs_or_provenance():
    cite = Refs(deltas=("x",))
    bead = Refs(beads=(BeadRef("b", "used"),))
    assert SEEN.reads(delta("tick"))
    assert SEEN.reads(delta("message", refs=cite))
    assert SEEN.reads(delta("message", provenance="dream"))
    assert not SEEN.reads(delta("message"))
    assert not SEEN.reads(delta("message", refs=bead))   # refs, but not of a field it reads
    assert not SEEN.reads(delta("message", refs=Refs()))  # refs present, every field empty
    assert COUNTS.reads(delta("message")) and not TALLY.reads(delta("message"))


def test_read_declarations_are_checked():
    with pytest.raises(ValueError, match=r"refs \['bead'\] are not fields of Refs"):
        Projection("p", 1, 0, lambda s, d: s, kinds={"tick"}, refs={"bead"})
    with pytest.raises(TypeError, match="provenances is a set of names"):
        Projection("p", 1, 0, lambda s, d: s, kinds={"tick"}, provenances="dream")
    with pytest.raises(TypeError, match="kinds is a set of names, not 'tick'"):
        Projection("p", 1, 0, lambda s, d: s, kinds="tick")
    p = Projection("p", 1, 0, lambda s, d: s, kinds=["tick"], refs=["deltas"], provenances=("dream",))
    assert (p.kinds, p.refs, p.provenances) == ({"tick"}, {"deltas"}, {"dream"})


def test_a_positional_evolve_gets_each_delta_s_seq_and_plain_fold_counts_them():
    deltas = random_deltas(random.Random(5), 60)
    assert SEEN.fold(deltas).at == expected_seen(deltas)
    half = SEEN.fold(deltas[:25])
    assert SEEN.fold(deltas[25:], half, seq=25).at == expected_seen(deltas)
    s = SEEN.start()
    for seq, d in enumerate(deltas, 1):
        s = SEEN.apply(s, d, seq) if SEEN.reads(d) else s
    assert s.at == expected_seen(deltas)
    assert COUNTS.apply(COUNTS.start(), deltas[0], 99).by_kind == {deltas[0].kind: 1}


# -- the engine's fold -----------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(8))
def test_states_standing_at_different_seqs_each_see_exactly_the_deltas_after_theirs(seed):
    rng = random.Random(seed)
    deltas = random_deltas(rng, 80)
    log = MemoryLog()
    log.append_batch(deltas)
    stop = rng.randrange(1, 81)
    ps = [SEEN, COUNTS, SEEN, TALLY, SEEN]
    seqs = [rng.randrange(0, stop + 5) for _ in ps]  # some past stop: those stay as they are
    states = [p.fold(deltas[:min(s, 80)]) for p, s in zip(ps, seqs, strict=False)]
    before = list(seqs)
    fold(log, ps, states, seqs, stop)
    for p, state, was in zip(ps, states, before, strict=False):
        want = p.fold(deltas[:max(was, stop)])
        assert encode_state(state) == encode_state(want), (p.name, was, stop)
    assert seqs == [max(s, stop) for s in before]
    for i in (0, 2, 4):
        assert states[i].at == expected_seen(deltas, stop=max(before[i], stop))


def _seen_by_name(s: list, d: GenericDelta) -> list:
    s.append(d.id)
    return s


@pytest.mark.parametrize("seed", range(4))
def test_a_fold_of_many_shows_each_projection_exactly_what_it_reads(seed):
    """Each declaration of reads (kinds, refs by field, provenance, all three, none) against
    deltas with no refs, empty refs, each ref field alone or both, dream or not: the fold of
    them all together shows each what it would see folded alone."""
    rng = random.Random(seed)
    bead = (BeadRef("bead-1", "used"),)
    deltas = []
    for i in range(120):
        cited = (deltas[rng.randrange(len(deltas))].id,) if deltas else ()
        refs = rng.choice([None, Refs(), Refs(beads=bead), Refs(deltas=cited),
                           Refs(beads=bead, deltas=cited)])
        deltas.append(delta(rng.choice(["tick", "message", "observation"]),
                            rng.choice(["user", "dream", "tool"]), refs, i))
    log = MemoryLog()
    log.append_batch(deltas)
    declared = [dict(kinds=None), dict(kinds={"tick"}), dict(kinds={"tick"}, refs={"beads"}),
                dict(kinds=set(), refs={"deltas", "beads"}), dict(kinds={"observation"},
                provenances={"dream"}), dict(kinds=set(), refs={"deltas"}, provenances={"dream"}),
                dict(kinds=set())]
    ps = [Projection(f"p{n}", 1, [], _seen_by_name, **reads) for n, reads in enumerate(declared)]
    ps.append(SEEN)
    states, seqs = [p.start() for p in ps], [0] * len(ps)
    fold(log, ps, states, seqs, len(deltas))
    for p, state in zip(ps, states, strict=False):
        assert encode_state(state) == encode_state(p.fold(deltas)), p.name
    assert states[-1].at == expected_seen(deltas)


def test_a_projection_added_later_catches_up_beside_checkpointed_ones(tmp_path):
    deltas = random_deltas(random.Random(11), 30)
    path = tmp_path / "store"
    with braidlog.open(path, projections=[COUNTS, TALLY], checkpoint_every=4) as b:
        b.append_batch(deltas[:17])
    with warnings.catch_warnings():
        warnings.simplefilter("error", CheckpointWarning)
        b = braidlog.open(path, projections=[COUNTS, SEEN, TALLY], checkpoint_every=4)
    try:
        assert b._seqs == [17, 17, 17]  # caught up on open: SEEN from 0, the others from 17
        b.append_batch(deltas[17:])
        for p in (COUNTS, SEEN, TALLY):
            assert encode_state(b.state(p.name)) == encode_state(p.fold(deltas)), p.name
            for k in (0, 9, 17, 23, 30):
                assert encode_state(b.at(k).state(p.name)) == encode_state(p.fold(deltas[:k]))
        assert b.state("seen").at == expected_seen(deltas)
    finally:
        b.close()


def test_progress_counts_every_delta_of_every_part():
    deltas = random_deltas(random.Random(3), 40)
    log = MemoryLog()
    log.append_batch(deltas)
    states, seqs, seen = [COUNTS.start(), SEEN.start()], [10, 0], []
    states[0] = COUNTS.fold(deltas[:10])
    fold(log, [COUNTS, SEEN], states, seqs, 40, progress=seen.append)
    assert seen[-1] == 40 and seen == sorted(seen)


# -- a projection's view: the fold decodes only the fields it reads ------------------------------

class _TagView(msgspec.Struct, frozen=True):
    kind: str
    tags: tuple[str, ...] = ()


def _tag_counts(state: dict, d) -> dict:
    for tag in d.tags:
        state[tag] = state.get(tag, 0) + 1
    state[d.kind] = state.get(d.kind, 0) + 1
    return state


@pytest.mark.parametrize("seed", [3, 11])
def test_a_view_gives_every_past_state_a_whole_delta_fold_gives(tmp_path, seed):
    rng = random.Random(seed)
    deltas = random_deltas(rng, 300)
    whole = Projection("tags", 1, {}, _tag_counts)
    viewed = Projection("tags", 1, {}, _tag_counts, view=_TagView)
    log = braidlog.LmdbLog(tmp_path / "s", durable=False)
    try:
        log.append_batch(deltas)
        braid = braidlog.Braid(log, [viewed], checkpoint_every=50)
        braid.checkpoint()
        for seq in [0, 1, 49, 50, 51, 173, 300] + [rng.randint(1, 300) for _ in range(10)]:
            assert braid.at(seq).state("tags") == whole.fold(deltas[:seq]), (seed, seq)
    finally:
        log.close()


def test_view_declarations_are_checked():
    with pytest.raises(TypeError, match="view must be a msgspec Struct type"):
        Projection("p", 1, 0, lambda s, d: s, view=dict)

    class Bad(msgspec.Struct):
        kind: str
        colour: str

    with pytest.raises(ValueError, match=r"view fields \['colour'\] are not fields of GenericDelta"):
        Projection("p", 1, 0, lambda s, d: s, view=Bad)

    class NoKind(msgspec.Struct):
        tags: tuple[str, ...] = ()

    with pytest.raises(ValueError, match=r"its view must hold \['kind'\]"):
        Projection("p", 1, 0, lambda s, d: s, kinds={"tick"}, view=NoKind)
    Projection("p", 1, 0, lambda s, d: s, view=NoKind)  # kinds=None: every delta, no kind needed


# -- the collector during a fold --------------------------------------------------------------------

def test_a_fold_runs_with_the_collector_off_and_leaves_it_as_it_found_it():
    import gc

    seen = []
    watch = Projection("gc.watch", 1, 0, lambda n, d: seen.append(gc.isenabled()) or n + 1)
    log = MemoryLog()
    log.append_batch([delta(i=i) for i in range(5)])
    was = gc.isenabled()
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            seen.clear()
            states = [0]
            fold(log, [watch], states, [0], 5)
            assert states == [5] and seen == [False] * 5
            assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_nested_and_failing_folds_turn_the_collector_back_on_once_the_last_ends():
    import gc

    from braidlog.replay import collector_paused

    was = gc.isenabled()
    gc.enable()
    try:
        with collector_paused():
            with pytest.raises(ZeroDivisionError):
                with collector_paused():
                    raise ZeroDivisionError
            assert not gc.isenabled()  # the outer fold still runs
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
