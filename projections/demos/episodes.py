"""Demo: an episode with anchor quotes, and a fork that drift proposes, confirms and promotes."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import braidlog
from braidlog import BeadRef, Provenance, ProvenanceKind
from braidlog.projections import beads, knots
from braidlog.projections import episodes as E

BRAID = "braid-demo"

CONVERSATION: list[tuple[ProvenanceKind, str]] = [
    ("user", "We need a store for the agent's memory. What are the options?"),
    ("assistant", "Three fit: SQLite in WAL mode, an LMDB-backed log, or a server database."),
    ("user", "It has to run inside the agent process; no server to operate."),
    ("assistant", "Then SQLite or LMDB. Both are embedded libraries."),
    ("user", "Every change must be auditable later, so nothing can be overwritten."),
    ("assistant", "An append-only log with a hash chain gives you that audit trail."),
    ("user", "Reads must never block the writer."),
    ("assistant", "LMDB readers never block its single writer; that matches."),
    ("user", "Fine. Let's use an embedded LMDB log."),
    ("assistant", "Agreed: an LMDB log, one writer, hash-chained records."),
    ("user", "Do we need to ship the log to a second machine at some point?"),
    ("assistant", "Maybe later; log shipping per braid would work. Let's note it as open."),
]

DRIFT: list[tuple[ProvenanceKind, str, list[E.ForkCandidate]]] = [
    ("user", "How fast is it, though? Can we benchmark it against SQLite?",
     [E.ForkCandidate(labels=E.Labels(topics=("benchmarks",), intents=("measure throughput",)), score=0.72),
      E.ForkCandidate(labels=E.Labels(topics=("replication",)), score=0.41)]),  # below 0.65: no fork
    ("user", "Let's write the benchmark suite: appends per second, replay time, recall latency.",
     [E.ForkCandidate(labels=E.Labels(topics=("benchmarks",), intents=("measure throughput",)), score=0.81)]),
    ("user", "Later we may ship the log to a second machine; keep that in mind.",
     [E.ForkCandidate(labels=E.Labels(topics=("replication",), intents=("ship the log",)), score=0.68)]),
]

QUOTES = [
    ("constraint", "It has to run inside the agent process; no server to operate.", 0.8),
    ("constraint", "Every change must be auditable later, so nothing can be overwritten.", 0.9),
    ("constraint", "Reads must never block the writer.", 0.6),
    ("decision", "Fine. Let's use an embedded LMDB log.", 0.9),
    ("open_question", "Do we need to ship the log to a second machine at some point?", 0.5),
]


def write(braid: braidlog.Braid, start: datetime, braid_id: str | None = None) -> list[str]:
    """Append a scripted piece of a session starting at ``start`` (into ``braid_id``, else a braid
    of its own); lines saying what it shows."""
    stamp = start.strftime("%Y%m%dT%H%M%S%f")
    braid_id = braid_id or f"{BRAID}-{stamp}"  # a braid per run: an interrupted run blocks no other
    episode_id = f"episode-storage-{stamp}"
    clock = iter(start + timedelta(seconds=10 * i) for i in range(1000))
    lines: list[str] = []

    def run(name: str, command: object, provenance: Provenance | str = "system") -> list[braidlog.Record]:
        return braid.execute(name, command, braid_id=braid_id, provenance=provenance, now=next(clock))

    def say(who: ProvenanceKind, text: str, knot_id: str | None = None) -> str:
        d = braidlog.delta(braid_id, "message", {"text": text}, ts=next(clock),
                           provenance=Provenance(who, episode_id=episode_id, knot_id=knot_id))
        braid.append(d)
        return d.id

    run("episodes", E.OpenEpisode(
        episode_id=episode_id, summary="choosing the storage engine for the agent's memory",
        labels=E.Labels(topics=("agent memory", "storage"), intents=("choose a database",),
                        modalities=("chat",))))
    said = {text: say(who, text) for who, text in CONVERSATION}
    for category, text, salience in QUOTES:
        run("episodes", E.NoteQuote(episode_id=episode_id, text=text, category=category,
                                    salience=salience, source_delta_id=said[text]))
    ep = E.episode(braid.state("episodes"), episode_id)
    assert ep is not None  # opened above
    lines.append(f"episode {episode_id}: labels {_labels(ep.labels)}; anchor quotes "
                 f"{_mix(ep.anchor_quotes)} (weights 70/20/10)")

    seqs = []
    for i, (who, text, candidates) in enumerate(DRIFT, start=1):
        knot_id = f"knot-episodes-{stamp}-{i}"
        bead_id = f"bead-thought-episodes-{stamp}-{i}"
        say(who, text)
        me = Provenance("assistant", knot_id=knot_id, episode_id=episode_id)
        run("knots", knots.OpenKnot(knot_id=knot_id, primary_episode_id=episode_id), "assistant")
        run("beads", beads.WriteBead(
            bead_id=bead_id, bead_type="reasoning_bead", name="thought summary",
            reasoning=beads.Reasoning(narrative="I noticed the user moving from choosing a store "
                                                "to measuring it.")), me)
        run("knots", knots.Speak(knot_id=knot_id, text="Noted; I'll keep the storage decision in view."),
            "assistant")
        run("knots", knots.TieKnot(knot_id=knot_id, summary=f"drift towards benchmarks ({i})",
                                   thought_summary_bead_ref=BeadRef(bead_id, "used")), "assistant")
        records = run("episodes", E.ProposeForks(parent_episode_id=episode_id,
                                                 candidates=candidates, signal_id=knot_id))
        seqs.append(records[-1].seq)
        lines.append(f"knot {i} ({knot_id}): drift signal -> "
                     + ", ".join(_describe(r.delta) for r in records))

    state = braid.state("episodes")
    ep = E.episode(state, episode_id)
    assert ep is not None  # opened above
    lines.append(f"episode {episode_id}: primary_knot_span {ep.primary_knot_span.start_knot_id} .. "
                 f"{ep.primary_knot_span.end_knot_id}")
    fork = next(e for e in E.episodes(state, braid_id)
                if e.fork is not None and e.fork.parent_episode_id == episode_id and e.status == "active")
    was = E.episode(braid.at(seqs[0]).state("episodes"), fork.id)
    assert was is not None and was.fork is not None and fork.continuity is not None  # a promoted fork
    lines.append(f"fork {fork.id} ({_labels(fork.labels)}): fork_pending with "
                 f"{was.fork.confirmations} confirmation (its proposal) at seq {seqs[0]}, active "
                 f"since seq {seqs[1]}; edge {fork.edges[0].type} -> {fork.edges[0].to_episode_id}")
    buf = fork.continuity
    lines.append(f"continuity buffer: {len(buf.message_ids)} recent messages, summary "
                 f"\"{buf.summary.render()}\", anchor quotes {_mix(buf.anchor_quotes)}")
    for pending in E.pending_forks(state, braid_id):
        expiry = E.fork_expiry(state, pending.id)
        assert expiry is not None  # a pending fork expires
        lines.append(f"fork {pending.id} ({_labels(pending.labels)}) stays fork_pending; it expires "
                     f"at {expiry.expired_at:%H:%M:%S} UTC or after {pending.fork_record.ttl_knots} knots, "
                     "whichever comes first, then decays to a soft_link")
    return lines


def _labels(labels: E.Labels) -> str:
    return "; ".join(f"{k}={','.join(v)}" for k, v in
                     (("topics", labels.topics), ("intents", labels.intents)) if v)


def _mix(quotes: Sequence[E.AnchorQuote]) -> str:
    counts = {c: sum(1 for q in quotes if q.category == c) for c in E.QUOTE_CATEGORIES}
    return f"{len(quotes)} ({', '.join(f'{n} {c}' for c, n in counts.items())})"


def _describe(d: braidlog.GenericDelta) -> str:
    p = d.payload
    if d.kind == "fork_proposed":
        topics = ",".join(p["labels"].get("topics", []))
        return f"fork_proposed {topics} (score {p['score']}, rank {p['rank']})"
    if d.kind == "fork_classified":
        return f"{p['verdict']} by {p['classifier']}"
    if d.kind == "fork_promoted":
        return f"promoted after {p['confirmations']} confirmations"
    if d.kind == "episode_edge_added":
        return f"edge {p['type']}"
    return d.kind
