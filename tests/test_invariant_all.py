"""The time-travel invariant over a log that mixes every registered kind.

For every projection shipped in ``projections`` and every point k of a log written by the demo
session (every family's piece), by commands for the kinds no demo piece writes, and by random
core deltas in between: ``braid.at(k).state(name)`` encodes exactly as a fresh fold of deltas
1..k does; with checkpoints every few seqs, after a reopen (the checkpoints are used), and with
a damaged checkpoint (ignored with a CheckpointWarning; the states stay right).
"""

from __future__ import annotations

import importlib
import os
import random
import shutil
import warnings
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
import pytest

import braidlog
import braidlog.projections as projections
from braidlog import CheckpointWarning, LmdbLog
from braidlog.cli.demo import PIECES, core_session
from braidlog.projections import decisions as D
from braidlog.projections import episodes as E
from braidlog.projections import fields as F
from braidlog.projections import memories as M
from braidlog.projections import trust as T
from braidlog.replay import Checkpoint, decode_state, encode_state, load_checkpoint

from .conftest import random_deltas

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
EVERY = 7          # checkpoint_every of the fast build
SAMPLE = 60        # points checked beside the checkpoint boundaries when a log is long
LONG = 250         # a log longer than this is checked at a sample of points


def _seed() -> int:
    return int(os.environ.get("BRAIDLOG_SEED", random.randrange(2**32)))


# -- building the mixed log -------------------------------------------------------------------

@dataclass
class Built:
    """A store written by the demo pieces, the commands for the rest, and random core deltas."""

    path: Path
    seed: int
    every: int
    head: int = 0
    demo_kinds: set[str] = field(default_factory=set)   # kinds the demo pieces and noise wrote
    rest_kinds: set[str] = field(default_factory=set)   # kinds only write_the_rest wrote


def _append_noise(braid: braidlog.Braid, rng: random.Random, noise: list) -> None:
    """Append the next few noise deltas: one at a time or as a batch, at random."""
    n = min(len(noise), rng.randrange(2, 7))
    chunk, noise[:] = noise[:n], noise[n:]
    if rng.random() < 0.5:
        braid.append_batch(chunk)
    else:
        for d in chunk:
            braid.append(d)


def write_demo(braid: braidlog.Braid, start: datetime, rng: random.Random, noise: list) -> None:
    """``braidlog.cli.demo.run_demo``'s loop on an open braid, with noise between the pieces."""
    braid.append_batch(core_session(f"demo-{start:%Y%m%dT%H%M%S}", start))
    offset = timedelta(minutes=5)
    for piece in PIECES:
        _append_noise(braid, rng, noise)
        module = importlib.import_module(f"braidlog.projections.demos.{piece}")
        assert module.write(braid, start + offset, braid_id="braid-demo")
        offset += timedelta(minutes=10)


def write_the_rest(braid: braidlog.Braid, start: datetime) -> None:
    """Through each projection's decide, the kinds the demo pieces do not write.

    Every command must append (a command that yields nothing would leave its kind uncovered).
    """
    braid_id = "braid-demo"  # the braid every piece wrote into (write(..., braid_id=...))

    def run(name: str, command: object, minute: int, who: str = "system") -> list[braidlog.Record]:
        records = braid.execute(name, command, braid_id=braid_id, provenance=who,
                                now=start + timedelta(minutes=minute))
        assert records, f"{type(command).__name__} appended nothing"
        return records

    # episodes: episode_labeled, episode_summarized, episode_knot_linked, fork_expired
    state = braid.state("episodes")
    ep = next(e for e in E.episodes(state, braid_id) if e.id.startswith("episode-storage-"))
    knot = next(k for k, seen in sorted(state.knots.items())
                if seen.tied and seen.braid_id == braid_id and seen.primary_episode_id != ep.id)
    run("episodes", E.LabelEpisode(episode_id=ep.id, labels=E.Labels(topics=("storage", "audit"))), 0)
    run("episodes", E.SummarizeEpisode(episode_id=ep.id, summary="chose an embedded LMDB log"), 1)
    run("episodes", E.LinkKnot(episode_id=ep.id, knot_id=knot), 2)
    # the demo's pending fork expired as the braid's time passed; a new one, expired before any
    # later delta of the braid shows it, is what ExpireForks records
    run("episodes", E.ProposeForks(parent_episode_id=ep.id, signal_id="rest-drift", candidates=[
        E.ForkCandidate(labels=E.Labels(topics=("backups",)), score=0.7)]), 2)
    assert E.pending_forks(braid.state("episodes"), braid_id), "no pending fork to expire"
    expired = run("episodes", E.ExpireForks(), 60 * 24)
    assert "fork_expired" in {r.delta.kind for r in expired}

    # decisions: trust_boundary_set, proposal_rejected, proposal_falsified, decisions_reflected
    ns = f"rest-{start:%Y%m%dT%H%M%S}"
    run("decisions", D.SetTrustBoundary(boundary=D.TrustBoundary.HUMAN_ONLY, namespace=ns), 3, "user")
    drafted = []
    for minute, (title, target) in enumerate([("Shard the log", "log_layout"),
                                              ("Compress payloads", "payload_codec")], start=4):
        proposal = D.ProposalContent(title=title, target=target, namespace=ns,
                                     rationale=f"{title} would help the store grow.")
        drafted.append(run("decisions", D.DraftProposal(proposal=proposal), minute, "user")[0].delta.id)
    run("decisions", D.RejectProposal(proposal_id=drafted[0], reason="one writer is enough"), 6, "user")
    run("decisions", D.FalsifyProposal(proposal_id=drafted[1], reason="payloads are already small"),
        7, "user")
    # decisions_reflected: a reflection reviews the streams the demo's uses left unreviewed
    run("decisions", D.Reflect(), 7)

    # fields: topic_restored (the demo archives scratch-notes)
    run("fields", F.RestoreTopic(topic_id="scratch-notes", reason="needed again"), 8)

    # memories: memory_updated
    memory = sorted(M.list_memories(braid.state("memories"), None), key=lambda m: m.id)[0]
    run("memories", M.UpdateMemory(memory_id=memory.id, content=memory.content + " (checked)",
                                   tags=["checked"]), 9, "assistant")

    # trust: trust, and the hypothesis payloads HypothesisTested and HypothesisRejected
    subject = next(braid.log.scan_kind("message", limit=1)).delta.id
    run("trust", T.AssessTrust(subject_id=subject, confidence=0.8, reason="the user said it"), 10)
    hypothesis = sorted(braid.state("trust").hypotheses)[0]
    run("trust", T.RecordTest(hypothesis_id=hypothesis, test="consistency", passed=True), 11)
    run("trust", T.RejectHypothesis(hypothesis_id=hypothesis, reason="the user checks at noon"), 12)


def build(path: Path, *, seed: int, every: int, noise: int, runs: int = 1) -> Built:
    """Write the mixed log at ``path`` with checkpoints every ``every`` seqs; close it."""
    rng = random.Random(seed)
    pending = random_deltas(rng, noise)
    built = Built(path, seed, every)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CheckpointWarning)
        b = braidlog.open(path, checkpoint_every=every)
        try:
            for run in range(runs):
                write_demo(b, START + timedelta(hours=6 * run), rng, pending)
            built.demo_kinds = set(b.log.counts("kind"))
            write_the_rest(b, START + timedelta(hours=6 * runs))
            while pending:
                _append_noise(b, rng, pending)
            built.rest_kinds = set(b.log.counts("kind")) - built.demo_kinds
            built.head = b.head().seq
            for p in b.projections.values():  # the live states, before the braid is closed
                assert encode_state(b.state(p.name)) == _fresh(b.log, p, built.head), (p.name, seed)
        finally:
            b.close()
    return built


# -- checking ---------------------------------------------------------------------------------

def _fresh(log, projection, k: int) -> bytes:
    """A fresh fold of deltas 1..k, encoded."""
    return encode_state(projection.fold([r.delta for r in log.scan(1, k + 1)]))


def _points(head: int, every: int, seed: int) -> list[int]:
    """Every k when the log is short; else a deterministic sample plus every checkpoint boundary."""
    if head <= LONG:
        return list(range(head + 1))
    ks = {0, 1, head} | set(random.Random(seed).sample(range(head + 1), SAMPLE))
    for c in range(every, head + 1, every):
        ks |= {c - 1, c, min(c + 1, head)}
    return sorted(ks)


def check_every_point(b: braidlog.Braid, built: Built, ks: list[int] | None = None) -> None:
    """``b.at(k).state(name)`` equals a fresh fold of deltas 1..k for every projection and k."""
    ks = _points(built.head, built.every, built.seed) if ks is None else ks
    deltas = [r.delta for r in b.log.scan()]
    assert len(deltas) == built.head
    names = list(b.projections)
    for k in ks:
        view = b.at(k)
        assert view.seq == k
        for name in names:
            p = b.projection(name)
            fresh = encode_state(p.fold(deltas[:k]))
            assert encode_state(view.state(name)) == fresh, \
                f"{name} at seq {k} differs from a fresh fold (BRAIDLOG_SEED={built.seed})"
    for name in names:
        assert encode_state(b.state(name)) == encode_state(b.projection(name).fold(deltas)), name


def _open(built: Built) -> braidlog.Braid:
    return braidlog.open(built.path, checkpoint_every=built.every)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    seed = _seed()
    print(f"\n[seed] BRAIDLOG_SEED={seed} reproduces the mixed log of {__name__}")
    return build(tmp_path_factory.mktemp("mixed") / "store", seed=seed, every=EVERY, noise=60)


@pytest.fixture
def copy_of(tmp_path):
    """A private copy of a built store (closed), to damage."""
    def copy(b: Built) -> Built:
        dest = tmp_path / "copy"
        shutil.copytree(b.path, dest)
        return Built(dest, b.seed, b.every, b.head, b.demo_kinds, b.rest_kinds)
    return copy


# -- the tests --------------------------------------------------------------------------------

def _kinds_read_by_projections() -> set[str]:
    """Every kind a shipped projection owns, and the core kinds every projection may read."""
    braidlog.projections.default_projections()  # importing the modules declares their kinds
    owners = set(projections.FAMILIES) | {"braid"}
    return {k for k in braidlog.REGISTRY if braidlog.REGISTRY[k].owner in owners}


def test_the_log_covers_every_kind_a_projection_owns(built):
    wanted = _kinds_read_by_projections()
    assert set(braidlog.MINIMUM_KINDS) <= wanted
    assert {braidlog.REGISTRY[k].owner for k in wanted} >= set(projections.FAMILIES)
    with LmdbLog(built.path, create=False, readonly=True) as log:
        counts = log.counts("kind")
    missing = sorted(wanted - set(counts))
    assert not missing, f"no delta of kind(s) {missing} in the mixed log"
    print(f"\nkinds no demo piece writes (written by write_the_rest): {sorted(built.rest_kinds)}")
    assert built.rest_kinds <= wanted
    assert not built.rest_kinds & built.demo_kinds


def test_at_k_equals_a_fresh_fold_then_again_after_reopening(built):
    with warnings.catch_warnings():
        warnings.simplefilter("error", CheckpointWarning)
        b = _open(built)
        try:
            check_every_point(b, built)
        finally:
            b.close()
        b = _open(built)  # the live states start from the checkpoint at the head
        try:
            assert b.notices == []
            for p in b.projections.values():
                seqs = b.log.checkpoint_seqs(p.name, p.version)
                boundaries = set(range(built.every, built.head + 1, built.every))
                assert boundaries <= set(seqs), (p.name, sorted(boundaries - set(seqs)))
                assert seqs[-1] == built.head, p.name
                for k in (0, built.every - 1, built.every, built.every + 1, built.head):
                    found = load_checkpoint(b.log, p, k)  # what at(k) starts from
                    nearest = max([s for s in seqs if s <= k], default=None)
                    assert (found[0] if found else None) == nearest, (p.name, k)
            check_every_point(b, built)
        finally:
            b.close()


def test_at_an_id_and_at_a_time_name_the_same_seq_as_at_k(built):
    b = _open(built)
    try:
        records = list(b.log.scan())
        high = []  # high[k-1]: the latest ts among deltas 1..k
        for r in records:
            high.append(max(high[-1], r.delta.ts) if high else r.delta.ts)
        rng = random.Random(built.seed)
        for rec in rng.sample(records, 12):
            by_id = b.at(rec.delta.id)
            assert by_id.seq == rec.seq
            when = rec.delta.ts
            by_time = b.at(when)  # the last seq up to which every delta happened at or before it
            expected = max([k for k, h in enumerate(high, 1) if h <= when], default=0)
            assert by_time.seq == expected, (rec.seq, when)
            for name in b.projections:
                assert encode_state(by_id.state(name)) == encode_state(b.at(rec.seq).state(name))
                assert encode_state(by_time.state(name)) == _fresh(b.log, b.projection(name), expected)
    finally:
        b.close()


def _damage(log: LmdbLog, projection, seq: int, how: str) -> str:
    """Damage ``projection``'s checkpoint at ``seq``; the reason a CheckpointWarning gives."""
    ck = msgspec.msgpack.decode(log.get_checkpoint(projection.name, projection.version, seq),
                                type=Checkpoint)
    if how == "digest":
        state = encode_state(decode_state(projection, ck.state))
        ck, why = Checkpoint(ck.seq, ck.chain, state + b"\x00", ck.digest), "does not match its hash"
    elif how == "chain":
        ck, why = Checkpoint.make(ck.seq, b"\1" * 32, ck.state), "chain hash it covers differs"
    else:
        ck, why = Checkpoint.make(ck.seq, ck.chain, b"\xc1 not msgpack"), "does not decode"
    log.put_checkpoint(projection.name, projection.version, seq, msgspec.msgpack.encode(ck))
    return why


@pytest.mark.parametrize("how", ["digest", "chain", "state"])
def test_a_damaged_checkpoint_is_ignored_with_a_warning_and_states_stay_right(built, copy_of, how):
    built = copy_of(built)
    name = "episodes"
    p = next(p for p in braidlog.projections.default_projections() if p.name == name)
    c = (built.head // built.every // 2) * built.every  # a checkpoint in the middle of the log
    with LmdbLog(built.path) as log:
        assert c in log.checkpoint_seqs(p.name, p.version)
        why = _damage(log, p, c, how)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CheckpointWarning)
        b = _open(built)  # the head's checkpoint is intact: no warning on open
    try:
        for k in (c, c + built.every - 1):  # the points that would start from checkpoint c
            with pytest.warns(CheckpointWarning, match=f"{name} v{p.version} at seq {c} ignored: .*{why}"):
                state = b.at(k).state(name)
            assert encode_state(state) == _fresh(b.log, p, k), k
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CheckpointWarning)
            check_every_point(b, built)
        assert any(f"at seq {c} ignored" in n for n in b.notices)
    finally:
        b.close()


def test_a_damaged_head_checkpoint_warns_on_open_and_the_live_states_are_rebuilt(built, copy_of):
    built = copy_of(built)
    with LmdbLog(built.path) as log:
        ps = braidlog.projections.default_projections()
        for p in ps:
            _damage(log, p, built.head, "digest")
    with pytest.warns(CheckpointWarning, match=f"at seq {built.head} ignored"):
        b = _open(built)
    try:
        assert len([n for n in b.notices if f"at seq {built.head} ignored" in n]) == len(ps)
        for p in ps:
            assert encode_state(b.state(p.name)) == _fresh(b.log, p, built.head), p.name
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CheckpointWarning)
            check_every_point(b, built, ks=[0, built.head - 1, built.head])
    finally:
        b.close()


def test_run_demo_itself_satisfies_the_invariant(tmp_path):
    """The demo exactly as `braidlog demo` writes it (default checkpoint_every), at a sample."""
    from braidlog.cli.demo import run_demo

    path = tmp_path / "demo"
    run_demo(str(path))
    b = braidlog.open(path)
    try:
        head = b.head().seq
        built = Built(path, 0, b.checkpoint_every, head)
        check_every_point(b, built, ks=sorted({0, 1, head // 3, head // 2, head - 1, head}))
    finally:
        b.close()


@pytest.mark.slow
def test_every_point_of_a_longer_log_with_checkpoints_every_3(tmp_path):
    """Two demo sessions, more noise, checkpoints every 3 seqs; every k, before and after reopening."""
    seed = _seed()
    print(f"\n[seed] BRAIDLOG_SEED={seed}")
    built = build(tmp_path / "store", seed=seed, every=3, noise=300, runs=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CheckpointWarning)
        for _ in range(2):
            b = _open(built)
            try:
                check_every_point(b, built, ks=list(range(built.head + 1)))
            finally:
                b.close()


def test_what_each_projection_declares_it_reads_loses_nothing(built):
    """Folding only the deltas a projection declares (kinds, refs, provenances) gives the state
    that showing it every delta gives: its evolve leaves the state alone on any other delta."""
    import dataclasses

    with LmdbLog(built.path, create=False, readonly=True) as log:
        deltas = [r.delta for r in log.scan()]
    for p in braidlog.projections.default_projections():
        every = dataclasses.replace(p, kinds=None, refs=frozenset(), provenances=frozenset())
        assert encode_state(p.fold(deltas)) == encode_state(every.fold(deltas)), p.name
    # and the check can fail: after a dream and a delta citing it (added here, since the random
    # log may hold neither), trust declared blind to dreams or to citations folds another state
    at = deltas[-1].ts + timedelta(seconds=1)
    dreamt = braidlog.delta("b-dream", "observation", {"text": "dreamt"}, provenance="dream", ts=at)
    citing = braidlog.delta("b-dream", "message", {"text": "as dreamt"}, ts=at,
                            refs=braidlog.Refs(deltas=(dreamt.id,)))
    ending = deltas + [dreamt, citing]
    t = T.PROJECTIONS[0]
    for blind in (dataclasses.replace(t, provenances=frozenset()),
                  dataclasses.replace(t, refs=frozenset())):
        assert encode_state(blind.fold(ending)) != encode_state(t.fold(ending))
