"""A store written by the demo session (every family's piece), by commands for the kinds no demo
piece writes, and by random core deltas in between: the log the time-travel invariant runs over."""

from __future__ import annotations

import importlib
import os
import random
import warnings
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import braidlog
from braidlog import CheckpointWarning
from braidlog.cli.demo import PIECES, core_session
from braidlog.projections import decisions as D
from braidlog.projections import episodes as E
from braidlog.projections import fields as F
from braidlog.projections import memories as M
from braidlog.projections import trust as T
from braidlog.replay import encode_state

from . import random_deltas

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


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
                assert encode_state(b.state(p.name)) == fresh_fold(b.log, p, built.head), (p.name, seed)
        finally:
            b.close()
    return built




def fresh_fold(log, projection, k: int) -> bytes:
    """A fresh fold of deltas 1..k, encoded."""
    return encode_state(projection.fold([r.delta for r in log.scan(1, k + 1)]))
