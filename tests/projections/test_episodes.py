"""Episodes and forks: every rule and refusal, anchor quotes, TTLs, continuity buffers, round trips."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ulid import ULID

import braidlog
from braidlog import BeadRef, Context, Provenance, Rejected, ValidationError
from braidlog.projections import beads, knots
from braidlog.projections import episodes as E

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
B = "braid-1"


def ids(start: int = 1):
    return (str(ULID.from_int(n)) for n in itertools.count(start))


class Pure:
    """Decide and fold without a store (ctx.log is None)."""

    def __init__(self, policy: E.ForkPolicy | None = None) -> None:
        self.decider = E.decider(policy) if policy else E.PROJECTION
        self.state = self.decider.start()
        self.log: list[braidlog.GenericDelta] = []
        self.ids = ids()

    def run(self, command, now: datetime = T0, braid_id: str = B) -> list[braidlog.GenericDelta]:
        """Decide, then pass the boundary as a Braid would: each delta checked against the
        state with the earlier ones folded in, all or nothing."""
        ctx = Context(now=now, braid_id=braid_id, ids=self.ids)
        out = self.decider.decide(command, self.state, ctx)
        trial = msgspec.msgpack.decode(msgspec.msgpack.encode(self.state), type=E.State)
        for i, d in enumerate(out):
            braidlog.validate(d)
            self.decider.check(trial, d, braidlog.Boundary(len(self.log) + i + 1, i,
                                                            _Log(self.log + out[:i])))
            trial = self.decider.evolve(trial, d)
        self.log.extend(out)
        self.state = trial
        return out

    def append(self, deltas) -> None:
        self.log.extend(deltas)
        self.state = self.decider.fold(deltas, self.state)

    def message(self, text: str, ts: datetime, braid_id: str = B) -> braidlog.GenericDelta:
        d = braidlog.delta(braid_id, "message", {"text": text}, provenance="user", ts=ts,
                           id=next(self.ids))
        self.append([d])
        return d


class _Log:
    """The little of a log the episode rules read: ``get`` by id."""

    def __init__(self, deltas) -> None:
        self._by_id = {d.id: d for d in deltas}

    def get(self, delta_id):
        d = self._by_id.get(delta_id)
        return None if d is None else braidlog.Record(0, b"", d)


def labels(*topics: str, intents: tuple[str, ...] = ()) -> E.Labels:
    return E.Labels(topics=topics, intents=intents)


def cand(score: float, *topics: str) -> E.ForkCandidate:
    return E.ForkCandidate(labels=labels(*topics), score=score)


def kinds(deltas) -> list[str]:
    return [d.kind for d in deltas]


@pytest.fixture
def pure() -> Pure:
    p = Pure()
    p.run(E.OpenEpisode(episode_id="ep-trip", labels=labels("Trip Planning", intents=("plan",)),
                        summary="planning a trip to Lisbon"))
    return p


@pytest.fixture
def braid(tmp_path):
    b = braidlog.open(tmp_path / "episodes.lmdb", projections=[E.PROJECTION])
    b.execute(E.PROJECTION, E.OpenEpisode(episode_id="ep-trip", labels=labels("trip")),
              braid_id=B, now=T0)
    yield b
    b.close()


# -- kinds ------------------------------------------------------------------------------------

def test_kinds_are_owned_by_episodes():
    assert braidlog.REGISTRY.owned_by("episodes") == sorted(E.KINDS)


def test_projection_reads_every_delta_for_the_time_of_the_log():
    assert E.PROJECTION.kinds is None  # a fork's TTL runs out with the time any delta shows
    assert E.PROJECTION.name == "episodes"


# -- episodes ---------------------------------------------------------------------------------

def test_open_episode_normalizes_labels(pure):
    ep = E.episode(pure.state, "ep-trip")
    assert ep.labels == E.Labels(topics=("trip planning",), intents=("plan",))
    assert ep.summary_cache == "planning a trip to Lisbon"
    assert ep.status == "active" and ep.braid_id == B and ep.opened_at == T0


def test_open_episode_is_idempotent_with_an_id(pure):
    again = E.OpenEpisode(episode_id="ep-trip", labels=labels(" trip   PLANNING", intents=("Plan",)),
                          summary="planning a trip to Lisbon")
    assert pure.run(again) == []


def test_open_episode_without_id_makes_a_new_one():
    p = Pure()
    first = p.run(E.OpenEpisode(labels=labels("a")))
    second = p.run(E.OpenEpisode(labels=labels("a")))
    assert first[0].payload["episode_id"] != second[0].payload["episode_id"]
    assert len(E.episodes(p.state, B)) == 2


def test_open_episode_with_an_existing_id_and_other_content_is_rejected(pure):
    with pytest.raises(Rejected, match="already exists with other content"):
        pure.run(E.OpenEpisode(episode_id="ep-trip", labels=labels("cooking")))


def test_blank_label_is_refused():
    with pytest.raises(ValidationError) as e:
        Pure().run(E.OpenEpisode(labels=labels("ok", "  ")))
    assert e.value.field == "labels.topics[1]"


def test_overlong_summary_is_refused():
    with pytest.raises(ValidationError) as e:
        Pure().run(E.OpenEpisode(summary="x" * 2001))
    assert e.value.field == "summary"


def test_episodes_overlap_and_are_listed_per_braid(pure):
    pure.run(E.OpenEpisode(episode_id="ep-budget", labels=labels("budget")))
    pure.run(E.OpenEpisode(episode_id="ep-other", labels=labels("x")), braid_id="braid-2")
    assert [e.id for e in E.episodes(pure.state, B)] == ["ep-trip", "ep-budget"]
    assert [e.id for e in E.episodes(pure.state, "braid-2")] == ["ep-other"]


def test_label_episode_replaces_labels(pure):
    out = pure.run(E.LabelEpisode(episode_id="ep-trip", labels=labels("lisbon", "trip")))
    assert kinds(out) == ["episode_labeled"]
    assert E.episode(pure.state, "ep-trip").labels == labels("lisbon", "trip")
    assert pure.run(E.LabelEpisode(episode_id="ep-trip", labels=labels("Trip", "Lisbon"))) == []


def test_label_unknown_or_foreign_episode_is_rejected(pure):
    with pytest.raises(Rejected, match="no episode 'nope'"):
        pure.run(E.LabelEpisode(episode_id="nope", labels=labels("a")))
    with pytest.raises(Rejected, match="belongs to braid 'braid-1'"):
        pure.run(E.LabelEpisode(episode_id="ep-trip", labels=labels("a")), braid_id="braid-2")


def test_summarize_replaces_the_summary_cache(pure):
    out = pure.run(E.SummarizeEpisode(episode_id="ep-trip", summary="booked flights"))
    assert kinds(out) == ["episode_summarized"]
    assert E.episode(pure.state, "ep-trip").summary_cache == "booked flights"
    assert pure.run(E.SummarizeEpisode(episode_id="ep-trip", summary="booked flights")) == []


def test_evolve_ignores_deltas_about_unknown_or_foreign_episodes(pure):
    def unclocked(state):  # every delta moves its braid's clock; nothing else may change
        return msgspec.msgpack.encode(msgspec.structs.replace(state, clock={}))

    before = unclocked(pure.state)
    raw = [
        braidlog.delta(B, "episode_labeled", {"episode_id": "ghost", "labels": {"topics": ["x"]}}, ts=T0),
        braidlog.delta("braid-2", "episode_summarized", {"episode_id": "ep-trip", "summary": "x"}, ts=T0),
        braidlog.delta(B, "fork_classified", {"fork_id": "ep-trip", "verdict": "reject",
                                              "classifier": "x", "signal_id": "s"}, ts=T0),
        braidlog.delta(B, "fork_expired", {"fork_id": "ghost", "parent_episode_id": "ep-trip",
                                           "reason": "knots", "expired_at": "2025-03-01T09:00:00Z",
                                           "outcome": "discarded"}, ts=T0),
        braidlog.delta(B, "knot_lifecycle", {"type": "SpeakPassBegan", "knot_id": "k"}, ts=T0),
    ]
    for d in raw:
        braidlog.validate(d)
    pure.append(raw)
    assert unclocked(pure.state) == before
    assert pure.state.clock == {B: T0, "braid-2": T0}


def test_a_quote_id_noted_twice_counts_once(pure):
    out = pure.run(E.NoteQuote(episode_id="ep-trip", text="Budget", category="constraint"))
    pure.append([msgspec.structs.replace(out[0], id=str(ULID.from_int(10**9)))])
    assert len(E.episode(pure.state, "ep-trip").candidates) == 1


# -- edges ------------------------------------------------------------------------------------

@pytest.mark.parametrize("edge_type", E.EDGE_TYPES)
def test_every_seed_edge_type_is_accepted(pure, edge_type):
    pure.run(E.OpenEpisode(episode_id="ep-b", labels=labels("b")))
    out = pure.run(E.AddEdge(episode_id="ep-trip", type=edge_type, to_episode_id="ep-b", confidence=0.4))
    assert kinds(out) == ["episode_edge_added"]
    assert E.episode(pure.state, "ep-trip").edges == [E.Edge(edge_type, "ep-b", 0.4)]
    assert E.edges_to(pure.state, "ep-b") == [("ep-trip", E.Edge(edge_type, "ep-b", 0.4))]


def test_edges_are_idempotent_and_confidence_can_change(pure):
    pure.run(E.OpenEpisode(episode_id="ep-b"))
    cmd = E.AddEdge(episode_id="ep-trip", type="depends_on", to_episode_id="ep-b", confidence=0.5)
    assert len(pure.run(cmd)) == 1
    assert pure.run(cmd) == []
    pure.run(E.AddEdge(episode_id="ep-trip", type="depends_on", to_episode_id="ep-b", confidence=0.9))
    assert E.episode(pure.state, "ep-trip").edges == [E.Edge("depends_on", "ep-b", 0.9)]


def test_unknown_edge_type_is_refused(pure):
    pure.run(E.OpenEpisode(episode_id="ep-b"))
    with pytest.raises(ValidationError) as e:
        pure.run(E.AddEdge(episode_id="ep-trip", type="loves", to_episode_id="ep-b"))
    assert e.value.field == "type"
    assert "related_to, forked_from, resumed_from, soft_link, contradicts, depends_on" in e.value.rule


@pytest.mark.parametrize("confidence", [-0.1, 1.5])
def test_edge_confidence_outside_unit_interval_is_refused(pure, confidence):
    pure.run(E.OpenEpisode(episode_id="ep-b"))
    with pytest.raises(ValidationError) as e:
        pure.run(E.AddEdge(episode_id="ep-trip", type="related_to", to_episode_id="ep-b",
                           confidence=confidence))
    assert e.value.field == "confidence"


def test_self_edge_and_missing_target_are_refused(pure):
    with pytest.raises(ValidationError) as e:
        pure.run(E.AddEdge(episode_id="ep-trip", type="related_to", to_episode_id="ep-trip"))
    assert e.value.field == "to_episode_id"
    with pytest.raises(Rejected, match="to_episode_id: no episode 'ghost'"):
        pure.run(E.AddEdge(episode_id="ep-trip", type="related_to", to_episode_id="ghost"))


def test_a_raw_edge_delta_with_an_unknown_type_is_refused_by_the_registry():
    d = braidlog.delta(B, "episode_edge_added", {"episode_id": "a", "type": "loves",
                                                 "to_episode_id": "b", "confidence": 0.5}, ts=T0)
    with pytest.raises(ValidationError) as e:
        braidlog.validate(d)
    assert e.value.field == "payload.type"


# -- anchor quotes ----------------------------------------------------------------------------

@pytest.mark.parametrize("n, seats", [(0, [0, 0, 0]), (1, [1, 0, 0]), (2, [1, 1, 0]),
                                      (3, [2, 1, 0]), (4, [3, 1, 0]), (5, [3, 1, 1]),
                                      (10, [7, 2, 1])])
def test_apportion_follows_70_20_10(n, seats):
    assert E.apportion(n) == seats


def quote(order: int, category: str, text: str | None = None, salience: float = 0.5) -> E.Candidate:
    return E.Candidate(order, E.AnchorQuote(f"q{order}", "ep", text or f"{category} {order}",
                                            category, salience))


def test_selection_takes_3_constraints_1_decision_1_open_question():
    pool = [quote(i, c) for i, c in enumerate(["constraint"] * 6 + ["decision"] * 3 + ["open_question"] * 2)]
    picked = E.select_anchor_quotes(pool)
    assert [q.category for q in picked] == ["constraint"] * 3 + ["decision", "open_question"]
    # most recently noted first within a category (equal salience)
    assert [q.quote_id for q in picked] == ["q5", "q4", "q3", "q8", "q10"]


def test_selection_prefers_salience_then_recency():
    pool = [quote(1, "constraint", salience=0.9), quote(2, "constraint", salience=0.1),
            quote(3, "constraint", salience=0.5), quote(4, "constraint", salience=0.5)]
    picked = E.select_anchor_quotes(pool, limit=3)
    assert [q.quote_id for q in picked] == ["q1", "q4", "q3"]


def test_selection_gives_seats_of_a_short_category_to_the_heaviest_with_spares():
    pool = [quote(1, "decision"), quote(2, "decision"), quote(3, "decision"), quote(4, "open_question"),
            quote(5, "constraint")]
    # seats 3/1/1, constraints has 1: its 2 spare seats go to decisions (the heaviest with spares)
    assert [q.category for q in E.select_anchor_quotes(pool)] == [
        "constraint", "decision", "decision", "decision", "open_question"]


def test_selection_with_two_or_fewer_candidates_takes_them_all():
    assert E.select_anchor_quotes([]) == []
    one = [quote(1, "open_question")]
    assert [q.quote_id for q in E.select_anchor_quotes(one)] == ["q1"]
    two = [quote(1, "open_question"), quote(2, "open_question")]
    assert [q.quote_id for q in E.select_anchor_quotes(two)] == ["q2", "q1"]


def test_selection_counts_the_same_text_once():
    pool = [quote(1, "constraint", "Budget  under 2000 EUR"), quote(2, "constraint", "budget under 2000 eur"),
            quote(3, "decision")]
    assert [q.quote_id for q in E.select_anchor_quotes(pool)] == ["q2", "q3"]


categories = st.sampled_from(E.QUOTE_CATEGORIES)
saliences = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(categories, saliences), max_size=25), st.randoms(use_true_random=False))
def test_selection_is_deterministic_bounded_and_weighted(spec, rnd):
    pool = [quote(i, c, salience=s) for i, (c, s) in enumerate(spec)]
    picked = E.select_anchor_quotes(pool)
    shuffled = list(pool)
    rnd.shuffle(shuffled)
    assert E.select_anchor_quotes(shuffled) == picked          # input order does not matter
    assert len(picked) == min(len(pool), E.MAX_ANCHOR_QUOTES)  # 2..5 once there are 2 candidates
    by_cat = {c: [q for q in picked if q.category == c] for c in E.QUOTE_CATEGORIES}
    seats = dict(zip(E.QUOTE_CATEGORIES, E.apportion(len(picked)), strict=False))
    for c in E.QUOTE_CATEGORIES:
        available = sum(1 for q in pool if q.quote.category == c)
        assert len(by_cat[c]) >= min(seats[c], available)   # a category gets its seats if it can
    assert [q.category for q in picked] == sorted((q.category for q in picked),
                                                  key=E.QUOTE_CATEGORIES.index)


def test_note_quote_feeds_anchor_quotes(pure):
    texts = [("constraint", "Budget under 2000 EUR"), ("constraint", "No red-eye flights"),
             ("constraint", "Back by the 14th"), ("constraint", "Vegetarian food"),
             ("decision", "We fly TAP"), ("decision", "Hotel in Alfama"),
             ("open_question", "Do we rent a car?")]
    for category, text in texts:
        out = pure.run(E.NoteQuote(episode_id="ep-trip", text=text, category=category))
        assert kinds(out) == ["anchor_quote_noted"]
    picked = E.anchor_quotes(pure.state, "ep-trip")
    assert [q.text for q in picked] == ["Vegetarian food", "Back by the 14th", "No red-eye flights",
                                        "Hotel in Alfama", "Do we rent a car?"]
    assert E.episode(pure.state, "ep-trip").anchor_quotes == picked


def test_anchor_quotes_are_the_same_for_the_same_log(pure):
    for i in range(12):
        pure.run(E.NoteQuote(episode_id="ep-trip", text=f"quote {i}",
                             category=E.QUOTE_CATEGORIES[i % 3], salience=(i % 4) / 4))
    again = E.PROJECTION.fold(pure.log)
    assert E.anchor_quotes(again, "ep-trip") == E.anchor_quotes(pure.state, "ep-trip")
    assert len(E.anchor_quotes(again, "ep-trip")) == 5


def test_note_quote_is_idempotent_by_category_and_text(pure):
    pure.run(E.NoteQuote(episode_id="ep-trip", text="Budget under 2000 EUR", category="constraint"))
    assert pure.run(E.NoteQuote(episode_id="ep-trip", text="budget  under 2000 eur",
                                category="constraint")) == []
    assert len(pure.run(E.NoteQuote(episode_id="ep-trip", text="Budget under 2000 EUR",
                                    category="decision"))) == 1


def test_note_quote_refusals(pure):
    with pytest.raises(ValidationError) as e:
        pure.run(E.NoteQuote(episode_id="ep-trip", text="x", category="rumour"))
    assert e.value.field == "category"
    with pytest.raises(ValidationError) as e:
        pure.run(E.NoteQuote(episode_id="ep-trip", text="   ", category="decision"))
    assert e.value.field == "text"
    with pytest.raises(ValidationError) as e:
        pure.run(E.NoteQuote(episode_id="ep-trip", text="x" * 501, category="decision"))
    assert e.value.field == "text"
    with pytest.raises(ValidationError) as e:
        pure.run(E.NoteQuote(episode_id="ep-trip", text="x", category="decision", salience=2.0))
    assert e.value.field == "salience"


def test_note_quote_checks_its_source_delta_in_the_log(braid):
    msg = braidlog.delta(B, "message", {"text": "budget is 2000"}, ts=T0)
    other = braidlog.delta("braid-2", "message", {"text": "elsewhere"}, ts=T0)
    braid.append_batch([msg, other])
    braid.execute(E.PROJECTION, E.NoteQuote(episode_id="ep-trip", text="budget is 2000",
                                            category="constraint", source_delta_id=msg.id),
                  braid_id=B, now=T0)
    head = braid.head()
    with pytest.raises(Rejected, match="no delta"):
        braid.execute(E.PROJECTION, E.NoteQuote(episode_id="ep-trip", text="y", category="decision",
                                                source_delta_id=str(ULID())), braid_id=B, now=T0)
    with pytest.raises(Rejected, match="belongs to braid 'braid-2'"):
        braid.execute(E.PROJECTION, E.NoteQuote(episode_id="ep-trip", text="y", category="decision",
                                                source_delta_id=other.id), braid_id=B, now=T0)
    assert braid.head() == head
    history = [r.delta.kind for r in braid.log.scan_refs(msg.id)]
    assert history == ["anchor_quote_noted"]


# -- forks: proposal --------------------------------------------------------------------------

def propose(p: Pure, signal: str, *candidates: E.ForkCandidate, parent: str = "ep-trip",
            now: datetime = T0) -> list[braidlog.GenericDelta]:
    return p.run(E.ProposeForks(parent_episode_id=parent, candidates=list(candidates),
                                signal_id=signal), now=now)


def test_drift_proposes_a_pending_fork_with_its_ttl(pure):
    out = propose(pure, "k1", cand(0.7, "Visa"))
    assert kinds(out) == ["fork_proposed"]
    fork_id = out[0].payload["fork_id"]
    fork = E.episode(pure.state, fork_id)
    assert fork.status == "fork_pending" and fork.labels == labels("visa")
    assert fork.fork.parent_episode_id == "ep-trip" and fork.fork.score == 0.7
    assert fork.fork.ttl_knots == 8 and fork.fork.expires_at == T0 + timedelta(minutes=15)
    assert fork.fork.confirmations == 1, "the proposal is the first confirmation"
    assert out[0].confidence == 0.7 and "on_expiry" not in out[0].payload   # soft_link, the default
    assert fork.fork.on_expiry == "soft_link"
    assert E.pending_forks(pure.state, B) == [fork]
    assert fork.edges == []


def test_a_proposal_below_fork_confidence_0_65_opens_nothing(pure):
    assert propose(pure, "k1", cand(0.64, "visa"), cand(0.3, "hotel")) == []
    out = propose(pure, "k2", cand(0.65, "visa"), cand(0.649, "hotel"))
    assert [d.payload["labels"]["topics"] for d in out] == [["visa"]]
    assert propose(pure, "k3", cand(0.5, "visa")) == [], "nor does it confirm a pending fork"
    assert E.episode(pure.state, out[0].payload["fork_id"]).fork.confirmations == 1


def test_only_the_top_k_candidates_become_forks(pure):
    out = propose(pure, "k1", cand(0.72, "a"), cand(0.965, "b"), cand(0.825, "c"), cand(0.895, "d"),
                  cand(0.965, "b"), cand(0.685, "e"))
    proposed = [(d.payload["labels"]["topics"], d.payload["rank"]) for d in out]
    assert proposed == [(["b"], 1), (["d"], 2), (["c"], 3)]


def test_a_parent_holds_at_most_k_pending_forks(pure):
    propose(pure, "k1", cand(0.965, "a"), cand(0.93, "b"))
    out = propose(pure, "k2", cand(0.982, "c"), cand(0.979, "d"))
    assert [d.payload["labels"]["topics"] for d in out] == [["c"]]
    assert propose(pure, "k3", cand(0.996, "e")) == []
    assert len(E.pending_forks(pure.state, B)) == 3


def test_top_k_is_configurable():
    p = Pure(E.ForkPolicy(top_k=1))
    p.run(E.OpenEpisode(episode_id="ep-trip", labels=labels("trip")))
    assert len(propose(p, "k1", cand(0.755, "a"), cand(0.79, "b"))) == 1


@pytest.mark.parametrize("candidates, field, rule", [
    ([], "candidates", "at least one"),
    ([E.ForkCandidate(labels=E.Labels(modalities=("voice",)), score=0.825)], "candidates[0].labels",
     "topic or intent"),
    ([cand(0.825, "ok"), cand(0.825, "Trip Planning")], "candidates[1].labels", "not drift"),
    ([cand(1.175, "ok")], "candidates[0].score", "<= 1.0"),
    ([cand(0.825, "")], "candidates[0].labels.topics[0]", "length >= 1"),
])
def test_bad_proposals_are_refused(pure, candidates, field, rule):
    pure.run(E.LabelEpisode(episode_id="ep-trip", labels=labels("trip planning")))
    with pytest.raises(ValidationError) as e:
        pure.run(E.ProposeForks(parent_episode_id="ep-trip", candidates=candidates, signal_id="k"))
    assert e.value.field == field and rule in e.value.rule


def test_forks_grow_only_from_an_active_episode_of_the_braid(pure):
    fork_id = propose(pure, "k1", cand(0.825, "visa"))[0].payload["fork_id"]
    with pytest.raises(Rejected, match="is fork_pending; forks grow only from an active episode"):
        propose(pure, "k2", cand(0.825, "x"), parent=fork_id)
    with pytest.raises(Rejected, match="no episode 'ghost'"):
        propose(pure, "k2", cand(0.825, "x"), parent="ghost")


def test_a_pending_forks_labels_are_fixed(pure):
    fork_id = propose(pure, "k1", cand(0.825, "visa"))[0].payload["fork_id"]
    with pytest.raises(Rejected, match="fork_pending"):
        pure.run(E.LabelEpisode(episode_id=fork_id, labels=labels("other")))


# -- forks: confirmation and promotion --------------------------------------------------------

def test_a_second_identical_proposal_confirms_and_promotes_at_2(pure):
    fork_id = propose(pure, "k1", cand(0.7, "visa"))[0].payload["fork_id"]
    second = propose(pure, "k2", cand(0.9, "VISA"), now=T0 + timedelta(minutes=1))
    assert kinds(second) == ["fork_classified", "fork_promoted", "episode_edge_added"]
    assert second[0].payload == {"fork_id": fork_id, "verdict": "confirm", "classifier": "repeat",
                                 "signal_id": "k2", "confidence": 0.9}
    assert second[1].payload["confirmations"] == 2       # the proposal, and its repeat
    fork = E.episode(pure.state, fork_id)
    assert fork.status == "active" and fork.fork.outcome == "promoted"
    assert fork.fork.confirmations == 2 and fork.fork.confidence == 0.9   # max(0.7, 0.9)
    assert fork.edges == [E.Edge("forked_from", "ep-trip", 0.9)]
    assert fork.continuity is not None
    assert E.pending_forks(pure.state, B) == []


def test_a_weaker_repeat_keeps_the_higher_confidence():
    p = Pure(E.ForkPolicy(confirmations=3))
    p.run(E.OpenEpisode(episode_id="ep-trip", labels=labels("trip")))
    fork_id = propose(p, "k1", cand(0.8, "visa"))[0].payload["fork_id"]
    propose(p, "k2", cand(0.7, "visa"))
    fork = E.episode(p.state, fork_id).fork
    assert (fork.confirmations, fork.confidence) == (2, 0.8)


def test_a_retried_signal_counts_once():
    p = Pure(E.ForkPolicy(confirmations=3))
    p.run(E.OpenEpisode(episode_id="ep-trip", labels=labels("trip")))
    propose(p, "k1", cand(0.86, "visa"))
    assert propose(p, "k1", cand(0.86, "visa")) == []
    assert len(propose(p, "k2", cand(0.86, "visa"))) == 1
    assert propose(p, "k2", cand(0.86, "visa")) == []


def test_drift_that_already_forked_proposes_nothing(pure):
    for s in ("k1", "k2", "k3"):
        propose(pure, s, cand(0.86, "visa"))
    assert propose(pure, "k4", cand(0.86, "visa")) == []


def test_number_of_confirmations_is_configurable():
    p = Pure(E.ForkPolicy(confirmations=1))
    p.run(E.OpenEpisode(episode_id="ep-trip", labels=labels("trip")))
    propose(p, "k1", cand(0.825, "visa"))
    assert kinds(propose(p, "k2", cand(0.825, "visa"))) == [
        "fork_classified", "fork_promoted", "episode_edge_added"]


def test_a_pluggable_classifier_decides(pure):
    def overlap(fork, candidate, state):
        shared = set(fork.labels.topics) & set(E.normalize_labels(candidate.labels).topics)
        if not shared:
            return None
        if "never" in candidate.labels.topics:
            return E.Verdict("reject", 0.9)
        return E.Verdict("confirm", 0.8)

    p = Pure(E.ForkPolicy(classifier=overlap, classifier_name="overlap", confirmations=1))
    p.run(E.OpenEpisode(episode_id="ep-trip", labels=labels("trip")))
    a = propose(p, "k1", cand(0.825, "visa", "passport"))[0].payload["fork_id"]
    out = propose(p, "k2", cand(0.825, "visa"))
    assert kinds(out)[:2] == ["fork_classified", "fork_promoted"]
    assert out[0].payload["classifier"] == "overlap"
    assert E.episode(p.state, a).status == "active"
    b = propose(p, "k3", cand(0.825, "hotel"))[0].payload["fork_id"]
    out = propose(p, "k4", cand(0.825, "hotel", "never"))
    assert kinds(out) == ["fork_classified"] and out[0].payload["verdict"] == "reject"
    assert E.episode(p.state, b).status == "rejected"
    assert b not in [e.id for e in E.episodes(p.state, B)]
    assert b in [e.id for e in E.episodes(p.state, B, include_hidden=True)]


def test_an_external_classifier_confirms_or_rejects(pure):
    a = propose(pure, "k1", cand(0.825, "visa"))[0].payload["fork_id"]
    b = propose(pure, "k2", cand(0.825, "hotel"))[0].payload["fork_id"]
    out = pure.run(E.ClassifyFork(fork_id=a, verdict="confirm", classifier="llm", confidence=0.9))
    assert kinds(out) == ["fork_classified", "fork_promoted", "episode_edge_added"]
    assert out[0].payload["signal_id"] == "llm" and out[1].payload["confirmations"] == 2
    assert pure.run(E.ClassifyFork(fork_id=a, verdict="confirm", classifier="llm")) == []
    assert kinds(pure.run(E.ClassifyFork(fork_id=b, verdict="reject", classifier="user"))) == [
        "fork_classified"]
    assert E.episode(pure.state, b).status == "rejected"
    with pytest.raises(Rejected, match="^fork-pending: .* which is rejected"):
        pure.run(E.ClassifyFork(fork_id=b, verdict="confirm", classifier="llm"))


def test_candidates_past_the_top_k_do_not_confirm(pure):
    fork_id = propose(pure, "k1", cand(0.72, "visa"))[0].payload["fork_id"]
    out = propose(pure, "k2", cand(0.965, "a"), cand(0.93, "b"), cand(0.895, "c"), cand(0.86, "visa"))
    assert kinds(out) == ["fork_proposed", "fork_proposed"]   # a and b fill the two free slots
    assert E.episode(pure.state, fork_id).fork.confirmations == 1


def test_a_retried_signal_counts_once_for_any_classifier():
    def overlap(fork, candidate, state):
        shared = set(fork.labels.topics) & set(E.normalize_labels(candidate.labels).topics)
        return E.Verdict("confirm", 0.5) if shared else None

    p = Pure(E.ForkPolicy(classifier=overlap, classifier_name="overlap", confirmations=3))
    p.run(E.OpenEpisode(episode_id="ep-trip", labels=labels("trip")))
    fork_id = propose(p, "k1", cand(0.825, "visa", "passport"))[0].payload["fork_id"]
    assert propose(p, "k1", cand(0.825, "visa")) == []
    assert kinds(propose(p, "k2", cand(0.825, "visa"))) == ["fork_classified"]
    assert propose(p, "k2", cand(0.825, "passport")) == []
    assert E.episode(p.state, fork_id).fork.confirmations == 2


def test_confirming_a_promoted_fork_is_done_and_rejecting_it_is_refused(pure):
    propose(pure, "k1", cand(0.86, "visa"))
    out = propose(pure, "k2", cand(0.86, "visa"))
    fork_id = out[0].payload["fork_id"]
    assert E.episode(pure.state, fork_id).status == "active"
    assert propose(pure, "k3", cand(0.86, "visa")) == []      # this drift already forked
    assert pure.run(E.ClassifyFork(fork_id=fork_id, verdict="confirm", classifier="llm")) == []
    with pytest.raises(Rejected, match="^fork-pending: .* which is active \\(promoted\\)"):
        pure.run(E.ClassifyFork(fork_id=fork_id, verdict="reject", classifier="llm"))


def test_a_signal_gives_each_fork_one_verdict():
    def any_topic(fork, candidate, state):
        return E.Verdict("confirm", 0.5)

    p = Pure(E.ForkPolicy(classifier=any_topic, classifier_name="any", confirmations=3))
    p.run(E.OpenEpisode(episode_id="ep-trip", labels=labels("trip")))
    fork_id = propose(p, "k1", cand(0.825, "visa"))[0].payload["fork_id"]
    out = propose(p, "k2", cand(0.825, "a"), cand(0.79, "b"), cand(0.755, "c"))
    assert kinds(out) == ["fork_classified"]
    assert E.episode(p.state, fork_id).fork.confirmations == 2


def test_a_fork_promoted_by_a_signal_frees_its_slot(pure):
    propose(pure, "k1", cand(0.965, "a"), cand(0.93, "b"), cand(0.895, "c"))
    out = propose(pure, "k2", cand(0.965, "a"), cand(0.825, "d"))
    assert kinds(out) == ["fork_classified", "fork_promoted", "episode_edge_added", "fork_proposed"]
    assert sorted(f.labels.topics[0] for f in E.pending_forks(pure.state, B)) == ["b", "c", "d"]


def test_classify_refusals(pure):
    fork_id = propose(pure, "k1", cand(0.825, "visa"))[0].payload["fork_id"]
    with pytest.raises(ValidationError) as e:
        pure.run(E.ClassifyFork(fork_id=fork_id, verdict="maybe", classifier="llm"))
    assert e.value.field == "verdict"
    with pytest.raises(Rejected, match="was opened, not proposed as a fork"):
        pure.run(E.ClassifyFork(fork_id="ep-trip", verdict="confirm", classifier="llm"))
    with pytest.raises(Rejected, match="no episode 'ghost'"):
        pure.run(E.ClassifyFork(fork_id="ghost", verdict="confirm", classifier="llm"))


def test_unknown_command_is_refused(pure):
    with pytest.raises(ValidationError) as e:
        E.decide(E.ForkCandidate(labels=labels("a"), score=0.1), pure.state, Context(now=T0, braid_id=B))
    assert e.value.field == "command"


# -- forks: TTL by minutes --------------------------------------------------------------------

def test_expiry_by_minutes_is_a_function_of_the_point_asked(pure):
    fork_id = propose(pure, "k1", cand(0.86, "visa"))[0].payload["fork_id"]
    ttl = T0 + timedelta(minutes=15)
    assert E.expired_forks(pure.state, B, ttl - timedelta(seconds=1)) == []
    assert E.expired_forks(pure.state, B, ttl) == [E.Expiry(fork_id, ttl, "minutes")]
    assert E.pending_forks(pure.state, B, as_of=ttl) == []
    assert E.fork_status(pure.state, fork_id, ttl) == "linked"
    assert E.fork_status(pure.state, fork_id, ttl - timedelta(seconds=1)) == "fork_pending"
    assert [f.id for f in E.pending_forks(pure.state, B)] == [fork_id]   # the state's time: T0
    pure.message("any delta after the TTL", ttl + timedelta(seconds=1))   # time passes: no command
    fork = E.episode(pure.state, fork_id)
    assert fork.status == "linked" and fork.fork.expiry_reason == "minutes"
    assert fork.edges == [E.Edge("soft_link", "ep-trip", 0.43)]            # 0.86 x 0.5
    assert E.pending_forks(pure.state, B) == []
    assert pure.run(E.ExpireForks(), now=ttl + timedelta(minutes=3)) == []  # nothing left to record


def test_expire_forks_records_an_expiry_the_log_has_not_shown_yet(pure):
    fork_id = propose(pure, "k1", cand(0.86, "visa"))[0].payload["fork_id"]
    ttl = T0 + timedelta(minutes=15)
    assert pure.run(E.ExpireForks(), now=ttl - timedelta(seconds=1)) == []
    out = pure.run(E.ExpireForks(), now=ttl + timedelta(minutes=3))
    assert kinds(out) == ["fork_expired", "episode_edge_added"]
    assert out[0].payload == {"fork_id": fork_id, "parent_episode_id": "ep-trip", "reason": "minutes",
                              "expired_at": "2025-03-01T09:15:00Z", "outcome": "soft_link"}
    fork = E.episode(pure.state, fork_id)
    assert fork.status == "linked" and fork.edges == [E.Edge("soft_link", "ep-trip", 0.43)]


def test_expire_as_of_an_earlier_time_and_not_a_later_one(pure):
    propose(pure, "k1", cand(0.86, "visa"))
    now = T0 + timedelta(minutes=30)
    assert pure.run(E.ExpireForks(as_of=T0 + timedelta(minutes=5)), now=now) == []
    with pytest.raises(ValidationError) as e:
        pure.run(E.ExpireForks(as_of=now + timedelta(seconds=1)), now=now)
    assert e.value.field == "as_of"
    with pytest.raises(ValidationError) as e:
        pure.run(E.ExpireForks(as_of=datetime(2025, 3, 1, 9, 0)), now=now)
    assert e.value.field == "as_of"
    assert len(pure.run(E.ExpireForks(as_of=T0 + timedelta(minutes=15)), now=now)) == 2


def test_expiry_can_discard_instead_of_soft_linking():
    p = Pure(E.ForkPolicy(on_expiry="discard", ttl_minutes=10))
    p.run(E.OpenEpisode(episode_id="ep-trip", labels=labels("trip")))
    fork_id = propose(p, "k1", cand(0.86, "visa"))[0].payload["fork_id"]
    out = p.run(E.ExpireForks(), now=T0 + timedelta(minutes=10))
    assert kinds(out) == ["fork_expired"] and out[0].payload["outcome"] == "discarded"
    fork = E.episode(p.state, fork_id)
    assert fork.status == "discarded" and fork.edges == []
    assert fork_id not in [e.id for e in E.episodes(p.state, B)]
    with pytest.raises(Rejected, match="is discarded"):
        p.run(E.NoteQuote(episode_id=fork_id, text="x", category="decision"))


def test_an_expired_fork_cannot_be_classified_or_promoted(pure):
    fork_id = propose(pure, "k1", cand(0.86, "visa"))[0].payload["fork_id"]
    late = T0 + timedelta(minutes=16)
    with pytest.raises(Rejected, match="^fork-pending: fork .* expired at 2025-03-01T09:15:00\\+00:00 "
                                       "\\(minutes TTL\\)"):
        pure.run(E.ClassifyFork(fork_id=fork_id, verdict="confirm", classifier="llm"), now=late)


def test_a_drift_pass_records_expiries_before_proposing(pure):
    old = propose(pure, "k1", cand(0.86, "visa"))[0].payload["fork_id"]
    out = propose(pure, "k2", cand(0.86, "visa"), now=T0 + timedelta(minutes=20))
    assert kinds(out) == ["fork_expired", "episode_edge_added", "fork_proposed"]
    assert E.episode(pure.state, old).status == "linked"
    new = out[-1].payload["fork_id"]
    assert new != old and E.episode(pure.state, new).status == "fork_pending"


# -- continuity buffer ------------------------------------------------------------------------

def test_continuity_buffer_on_promotion(pure):
    for i in range(40):
        pure.message(f"message {i}", T0 - timedelta(hours=1) + timedelta(seconds=i))
    recent = [pure.message(f"recent {i}", T0 + timedelta(minutes=1, seconds=i)) for i in range(18)]
    now = T0 + timedelta(minutes=2)
    pure.run(E.NoteQuote(episode_id="ep-trip", text="Budget under 2000 EUR", category="constraint"), now=now)
    pure.run(E.NoteQuote(episode_id="ep-trip", text="We fly TAP", category="decision"), now=now)
    pure.run(E.NoteQuote(episode_id="ep-trip", text="Do we rent a car?", category="open_question"), now=now)
    fork_id = propose(pure, "k1", cand(0.86, "visa"), now=now)[0].payload["fork_id"]
    pure.run(E.NoteQuote(episode_id=fork_id, text="Passport valid 6 months", category="constraint"), now=now)
    out = propose(pure, "k2", cand(0.86, "visa"), now=T0 + timedelta(minutes=4))
    promoted = next(d for d in out if d.kind == "fork_promoted")
    buffer = E.episode(pure.state, fork_id).continuity
    assert list(buffer.message_ids) == [m.id for m in recent]        # 18 in the last 10 minutes
    assert set(promoted.refs.deltas) == {m.id for m in recent} and promoted.refs.episodes == ("ep-trip",)
    assert buffer.summary == E.CompactSummary(doing="planning a trip to Lisbon", goal="visa",
                                              unresolved="Do we rent a car?")
    assert [q.text for q in buffer.anchor_quotes] == [
        "Passport valid 6 months", "Budget under 2000 EUR", "We fly TAP", "Do we rent a car?"]
    fork = E.episode(pure.state, fork_id)
    assert fork.summary_cache == ("doing: planning a trip to Lisbon; goal: visa; "
                                  "unresolved: Do we rent a car?")
    assert [q.text for q in fork.anchor_quotes] == [q.text for q in buffer.anchor_quotes]


@pytest.mark.parametrize("spread, expected", [
    (timedelta(seconds=1), 30),     # all 40 in the last 10 minutes: capped at 30
    (timedelta(minutes=30), 15),    # none in the last 10 minutes: at least 15
])
def test_recent_message_bounds(pure, spread, expected):
    msgs = [pure.message(f"m{i}", T0 - spread * (40 - i)) for i in range(40)]
    got = E.recent_messages(pure.state, B, T0)
    assert [m.delta_id for m in got] == [m.id for m in msgs[-expected:]]


def test_the_message_window_is_bounded_per_braid(pure):
    for i in range(45):
        pure.message(f"m{i}", T0 + timedelta(seconds=i))
    pure.message("elsewhere", T0, braid_id="braid-2")
    assert len(pure.state.messages[B]) == E.MESSAGE_WINDOW
    assert pure.state.messages[B][0].text == "m15"
    assert [m.text for m in pure.state.messages["braid-2"]] == ["elsewhere"]


def test_fork_policy_is_validated():
    for kw, field in [({"top_k": 0}, "top_k"), ({"confirmations": 0}, "confirmations"),
                      ({"ttl_knots": 0}, "ttl_knots"), ({"ttl_minutes": 0}, "ttl_minutes"),
                      ({"on_expiry": "keep"}, "on_expiry"),
                      ({"buffer_max_messages": 31}, "buffer_max_messages"),
                      ({"buffer_min_messages": 20, "buffer_max_messages": 18}, "buffer_max_messages"),
                      ({"classifier": None}, "classifier")]:
        with pytest.raises(ValidationError) as e:
            E.ForkPolicy(**kw)
        assert e.value.field == f"ForkPolicy.{field}"


def test_default_policy_is_within_the_seed_ranges():
    p = E.ForkPolicy()
    assert p.top_k == 3 and 5 <= p.ttl_knots <= 10 and 10 <= p.ttl_minutes <= 20
    assert 15 <= p.buffer_min_messages <= p.buffer_max_messages <= 30 and 5 <= p.buffer_minutes <= 10


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(categories, saliences), max_size=8),
       st.lists(st.tuples(categories, saliences), max_size=4))
def test_a_promoted_fork_starts_with_its_buffers_anchor_quotes(parent_quotes, fork_quotes):
    p = Pure(E.ForkPolicy(confirmations=1))
    p.run(E.OpenEpisode(episode_id="ep-trip", labels=labels("trip")))
    for i, (c, s) in enumerate(parent_quotes):
        p.run(E.NoteQuote(episode_id="ep-trip", text=f"parent {i}", category=c, salience=s))
    fork_id = propose(p, "k1", cand(0.825, "visa"))[0].payload["fork_id"]
    for i, (c, s) in enumerate(fork_quotes):
        p.run(E.NoteQuote(episode_id=fork_id, text=f"fork {i}", category=c, salience=s))
    propose(p, "k2", cand(0.825, "visa"))
    fork = E.episode(p.state, fork_id)
    assert fork.status == "active"
    assert list(fork.continuity.anchor_quotes) == fork.anchor_quotes
    assert len(fork.anchor_quotes) == min(5, len(parent_quotes) + len(fork_quotes))


# -- with a store: knots, refusals, time travel, checkpoints ----------------------------------

ALL = [*beads.PROJECTIONS, *knots.PROJECTIONS, E.PROJECTION]


class Session:
    """A real LMDB store with beads, knots and episodes, and a clock that moves on each step."""

    def __init__(self, path, policy: E.ForkPolicy | None = None) -> None:
        self.episodes = E.decider(policy) if policy else E.PROJECTION
        self.braid = braidlog.open(path, projections=[*beads.PROJECTIONS, *knots.PROJECTIONS,
                                                      self.episodes])
        self.now = T0
        self.n = 0

    def tick(self, seconds: float = 10) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now

    def run(self, command, name: str = "episodes", braid_id: str = B, provenance="system"):
        decider = self.episodes if name == "episodes" else name
        return self.braid.execute(decider, command, braid_id=braid_id, provenance=provenance,
                                  now=self.tick())

    def knot(self, episode_id: str | None = None, braid_id: str = B) -> str:
        self.n += 1
        knot_id, bead_id = f"knot-{self.n}", f"bead-{self.n}"
        self.run(knots.OpenKnot(knot_id=knot_id, primary_episode_id=episode_id), "knots", braid_id,
                 "assistant")
        self.run(beads.WriteBead(bead_id=bead_id, bead_type="reasoning_bead", name="thought",
                                 reasoning=beads.Reasoning(narrative=f"I thought about step {self.n}.")),
                 "beads", braid_id, Provenance("assistant", knot_id=knot_id))
        self.run(knots.TieKnot(knot_id=knot_id, summary=f"step {self.n}",
                               thought_summary_bead_ref=BeadRef(bead_id, "used")), "knots", braid_id,
                 "assistant")
        return knot_id

    def state(self) -> E.State:
        return self.braid.state("episodes")


@pytest.fixture
def session(tmp_path):
    s = Session(tmp_path / "session.lmdb")
    s.run(E.OpenEpisode(episode_id="ep-trip", labels=labels("trip")))
    yield s
    s.braid.close()


def test_tied_knots_set_the_primary_knot_span(session):
    k1, k2 = session.knot("ep-trip"), session.knot("ep-trip")
    ep = E.episode(session.state(), "ep-trip")
    assert ep.primary_knot_span == E.KnotSpan(k1, k2)
    assert E.episodes_of_knot(session.state(), k2) == ["ep-trip"]


def test_a_knot_without_an_episode_lands_in_the_default_session_episode(session):
    k = session.knot()
    default = knots.knot(session.braid.state("knots"), k).primary_episode_id
    assert knots.is_default_episode_id(default, B)
    ep = E.episode(session.state(), default)
    assert ep.implicit and ep.status == "active" and ep.primary_knot_span == E.KnotSpan(k, k)
    assert session.run(E.LabelEpisode(episode_id=default, labels=labels("smalltalk")))


def test_a_knot_tied_twice_or_across_braids_counts_once(session):
    k = session.knot("ep-trip")
    tied = knots.knot(session.braid.state("knots"), k).tied_delta_id
    d = session.braid.log.get(tied).delta
    again = msgspec.structs.replace(d, id=str(ULID()))
    elsewhere = msgspec.structs.replace(d, id=str(ULID()), braid_id="braid-2")
    deltas = [r.delta for r in session.braid.log.scan()]
    state = E.PROJECTION.fold(deltas + [again, elsewhere])
    assert state.knots_tied == {B: 1}
    assert state.episodes["ep-trip"].primary_knot_span == E.KnotSpan(k, k)


def test_link_knot_adds_membership_once(session):
    k = session.knot("ep-trip")
    session.run(E.OpenEpisode(episode_id="ep-budget", labels=labels("budget")))
    assert [r.delta.kind for r in session.run(E.LinkKnot(episode_id="ep-budget", knot_id=k))] == [
        "episode_knot_linked"]
    assert session.run(E.LinkKnot(episode_id="ep-budget", knot_id=k)) == []
    assert session.run(E.LinkKnot(episode_id="ep-trip", knot_id=k)) == []   # already its primary
    assert E.episode(session.state(), "ep-budget").knot_refs == [k]
    assert E.episodes_of_knot(session.state(), k) == ["ep-trip", "ep-budget"]
    assert [r.delta.kind for r in session.braid.log.scan_refs(k)][-1] == "episode_knot_linked"


def test_link_knot_refusals_append_nothing(session):
    other = session.knot(braid_id="braid-2")
    session.run(knots.OpenKnot(knot_id="knot-open", primary_episode_id="ep-trip"), "knots",
                provenance="assistant")
    head = session.braid.head()
    with pytest.raises(Rejected, match="no tied knot 'ghost'"):
        session.run(E.LinkKnot(episode_id="ep-trip", knot_id="ghost"))
    with pytest.raises(Rejected, match="no tied knot 'knot-open'"):
        session.run(E.LinkKnot(episode_id="ep-trip", knot_id="knot-open"))
    with pytest.raises(Rejected, match="belongs to braid 'braid-2'"):
        session.run(E.LinkKnot(episode_id="ep-trip", knot_id=other))
    assert session.braid.head() == head


def test_ttl_by_knots_whichever_comes_first(tmp_path):
    s = Session(tmp_path / "ttl.lmdb", E.ForkPolicy(ttl_knots=3, ttl_minutes=60))
    s.run(E.OpenEpisode(episode_id="ep-trip", labels=labels("trip")))
    before = s.knot("ep-trip")   # tied before the proposal: does not count
    fork_id = s.run(E.ProposeForks(parent_episode_id="ep-trip", candidates=[cand(0.93, "visa")],
                                   signal_id=before))[0].delta.payload["fork_id"]
    s.knot("ep-trip")
    s.knot("ep-trip")
    assert E.fork_expiry(s.state(), fork_id).reason == "minutes"
    assert E.expired_forks(s.state(), B, s.now) == []
    third = s.knot("ep-trip")
    tie = knots.knot(s.braid.state("knots"), third)
    fork = E.episode(s.state(), fork_id)      # the third knot's tie expired it: no command ran
    assert (fork.status, fork.fork.expiry_reason, fork.fork.resolved_at) == ("linked", "knots",
                                                                              tie.tied.end_ts)
    assert fork.edges == [E.Edge("soft_link", "ep-trip", 0.465)]           # 0.93 x 0.5
    # the same log seen just before the third tie: still pending there, by the minutes TTL
    earlier = s.braid.at(s.braid.log.seq_of(tie.tied_delta_id) - 1).state("episodes")
    assert E.fork_status(earlier, fork_id) == "fork_pending"
    assert E.fork_expiry(earlier, fork_id).reason == "minutes"
    assert E.fork_status(s.braid.at(s.braid.log.seq_of(tie.tied_delta_id)).state("episodes"),
                         fork_id) == "linked"
    with pytest.raises(Rejected, match="^delta 0: fork-pending: .* which is linked"):
        s.run(E.ClassifyFork(fork_id=fork_id, verdict="confirm", classifier="llm"))
    assert s.run(E.ExpireForks()) == []
    s.braid.close()


def test_ttl_by_minutes_before_the_knots_run_out(tmp_path):
    s = Session(tmp_path / "ttl.lmdb", E.ForkPolicy(ttl_knots=10, ttl_minutes=10))
    s.run(E.OpenEpisode(episode_id="ep-trip", labels=labels("trip")))
    fork_id = s.run(E.ProposeForks(parent_episode_id="ep-trip", candidates=[cand(0.93, "visa")],
                                   signal_id="sig-1"))[0].delta.payload["fork_id"]
    proposed_at = s.now
    s.knot("ep-trip")
    assert E.fork_expiry(s.state(), fork_id) == E.Expiry(fork_id, proposed_at + timedelta(minutes=10),
                                                         "minutes")
    s.tick(600)
    assert [r.delta.payload["reason"] for r in s.run(E.ExpireForks())[:1]] == ["minutes"]
    s.braid.close()


def test_a_knot_tied_after_the_minutes_ttl_does_not_change_the_reason(tmp_path):
    s = Session(tmp_path / "ttl.lmdb", E.ForkPolicy(ttl_knots=1, ttl_minutes=10))
    s.run(E.OpenEpisode(episode_id="ep-trip", labels=labels("trip")))
    fork_id = s.run(E.ProposeForks(parent_episode_id="ep-trip", candidates=[cand(0.93, "visa")],
                                   signal_id="sig-1"))[0].delta.payload["fork_id"]
    expires_at = s.now + timedelta(minutes=10)
    s.tick(11 * 60)
    s.knot("ep-trip")
    fork = E.episode(s.state(), fork_id).fork
    assert (fork.expiry_reason, fork.resolved_at) == ("minutes", expires_at)
    s.braid.close()


def test_buffer_max_messages_caps_the_buffer(pure):
    for i in range(30):
        pure.message(f"m{i}", T0 - timedelta(seconds=30 - i))
    policy = E.ForkPolicy(buffer_min_messages=5, buffer_max_messages=20)
    assert len(E.recent_messages(pure.state, B, T0, policy)) == 20
    assert len(E.recent_messages(pure.state, B, T0 + timedelta(hours=1), policy)) == 5


REFUSALS = [
    (E.OpenEpisode(episode_id="ep-trip", labels=labels("other")), Rejected),
    (E.OpenEpisode(labels=labels(" ")), ValidationError),
    (E.LabelEpisode(episode_id="ghost", labels=labels("a")), Rejected),
    (E.AddEdge(episode_id="ep-trip", type="sibling_of", to_episode_id="ep-b"), ValidationError),
    (E.AddEdge(episode_id="ep-trip", type="related_to", to_episode_id="ep-b", confidence=1.01),
     ValidationError),
    (E.AddEdge(episode_id="ep-trip", type="related_to", to_episode_id="ep-trip"), ValidationError),
    (E.AddEdge(episode_id="ep-trip", type="related_to", to_episode_id="ghost"), Rejected),
    (E.SummarizeEpisode(episode_id="ghost", summary="x"), Rejected),
    (E.NoteQuote(episode_id="ep-trip", text="x", category="gossip"), ValidationError),
    (E.NoteQuote(episode_id="ep-trip", text="x", category="decision", source_delta_id="nope"), Rejected),
    (E.ProposeForks(parent_episode_id="ep-trip", candidates=[], signal_id="s"), ValidationError),
    (E.ProposeForks(parent_episode_id="ep-trip", candidates=[cand(0.825, "trip")], signal_id="s"),
     ValidationError),
    (E.ProposeForks(parent_episode_id="ghost", candidates=[cand(0.825, "x")], signal_id="s"), Rejected),
    (E.ClassifyFork(fork_id="ep-trip", verdict="confirm", classifier="llm"), Rejected),
    (E.ClassifyFork(fork_id="ep-trip", verdict="perhaps", classifier="llm"), ValidationError),
    (E.ExpireForks(as_of=T0 + timedelta(days=1)), ValidationError),
]


@pytest.mark.parametrize("command, error", REFUSALS, ids=lambda v: type(v).__name__)
def test_refusals_append_nothing(session, command, error):
    session.run(E.OpenEpisode(episode_id="ep-b", labels=labels("b")))
    head = session.braid.head()
    before = msgspec.msgpack.encode(session.state())
    with pytest.raises(error):
        session.run(command)
    assert session.braid.head() == head
    assert msgspec.msgpack.encode(session.state()) == before


def scenario(s: Session) -> None:
    """A log mixing every episode and fork kind with messages and knots."""
    for i in range(20):
        s.braid.append(braidlog.delta(B, "message", {"text": f"m{i}"}, ts=s.tick(5)))
    k1 = s.knot("ep-trip")
    s.run(E.OpenEpisode(episode_id="ep-budget", labels=labels("budget"), summary="money"))
    s.run(E.LinkKnot(episode_id="ep-budget", knot_id=k1))
    s.run(E.AddEdge(episode_id="ep-budget", type="depends_on", to_episode_id="ep-trip", confidence=0.7))
    s.run(E.SummarizeEpisode(episode_id="ep-trip", summary="trip"))
    s.run(E.NoteQuote(episode_id="ep-trip", text="under 2000 EUR", category="constraint"))
    s.run(E.NoteQuote(episode_id="ep-trip", text="fly TAP", category="decision"))
    s.run(E.NoteQuote(episode_id="ep-trip", text="car?", category="open_question"))
    s.run(E.ProposeForks(parent_episode_id="ep-trip", candidates=[cand(0.895, "visa"), cand(0.79, "food"),
                                                                  cand(0.755, "hotel")], signal_id=k1))
    k2 = s.knot("ep-trip")
    s.run(E.ProposeForks(parent_episode_id="ep-trip", candidates=[cand(0.93, "visa")], signal_id=k2))
    hotel = next(e.id for e in E.pending_forks(s.state(), B) if e.labels == labels("hotel"))
    s.run(E.ClassifyFork(fork_id=hotel, verdict="reject", classifier="user"))
    k3 = s.knot("ep-trip")
    s.run(E.ProposeForks(parent_episode_id="ep-trip", candidates=[cand(0.965, "visa")], signal_id=k3))
    s.tick(20 * 60)
    s.run(E.ExpireForks())


def test_state_round_trips_through_checkpoint_encoding(session):
    scenario(session)
    state = session.state()
    statuses = sorted(e.status for e in E.episodes(state, B, include_hidden=True))
    assert statuses == ["active", "active", "active", "linked", "rejected"]
    data = msgspec.msgpack.encode(state)
    assert msgspec.msgpack.decode(data, type=E.State) == state
    assert E.PROJECTION.fold(r.delta for r in session.braid.log.scan()) == state


def test_time_travel_equals_a_fresh_fold_and_survives_reopening(tmp_path):
    s = Session(tmp_path / "tt.lmdb")
    s.run(E.OpenEpisode(episode_id="ep-trip", labels=labels("trip")))
    scenario(s)
    deltas = [r.delta for r in s.braid.log.scan()]
    for seq in range(0, len(deltas) + 1, 7):
        assert s.braid.at(seq).state("episodes") == E.PROJECTION.fold(deltas[:seq])
    live = s.state()
    s.braid.close()
    again = braidlog.open(tmp_path / "tt.lmdb", projections=ALL)
    try:
        assert again.state("episodes") == live
    finally:
        again.close()


def test_the_demo_proposes_confirms_and_promotes_a_fork(tmp_path):
    from braidlog.projections.demos import episodes as demo

    with braidlog.open(tmp_path / "demo.lmdb", projections=ALL) as b:
        lines = demo.write(b, T0, braid_id=demo.BRAID)
        state = b.state("episodes")
    assert any("fork_proposed benchmarks" in line for line in lines)
    assert any("confirm by repeat, promoted after 2 confirmations, edge forked_from" in line
               for line in lines)
    promoted = [e for e in E.episodes(state, demo.BRAID) if e.fork and e.fork.outcome == "promoted"]
    assert len(promoted) == 1
    buf = promoted[0].continuity
    assert 15 <= len(buf.message_ids) <= 30 and 2 <= len(buf.anchor_quotes) <= 5
    assert buf.summary.doing and buf.summary.goal and buf.summary.unresolved


def test_a_raw_fork_promotion_without_its_confirmations_is_refused(braid):
    fork = braid.execute(E.PROJECTION, E.ProposeForks(
        parent_episode_id="ep-trip", candidates=[cand(0.8, "visa")], signal_id="k1"),
        braid_id=B, now=T0)[0].delta.payload["fork_id"]
    head = braid.head()
    buffer = {"summary": {"doing": "trip"}}
    for confirmations in (1, 2, 3):
        with pytest.raises(Rejected, match="^delta 0: fork-promotion-confirmed: fork .* has 1 "
                                           "confirmation\\(s\\) .* needs 2"):
            braid.append(braidlog.delta(B, "fork_promoted", {
                "fork_id": fork, "parent_episode_id": "ep-trip", "confirmations": confirmations,
                "buffer": buffer}, ts=T0 + timedelta(minutes=1)))
    assert braid.head() == head
    # after a confirm in the same batch, a promotion claiming 2 passes
    braid.append_batch([
        braidlog.delta(B, "fork_classified", {"fork_id": fork, "verdict": "confirm",
                                              "classifier": "llm", "signal_id": "s"},
                       ts=T0 + timedelta(minutes=1)),
        braidlog.delta(B, "fork_promoted", {"fork_id": fork, "parent_episode_id": "ep-trip",
                                            "confirmations": 2, "buffer": buffer},
                       ts=T0 + timedelta(minutes=1))])
    assert E.episode(braid.state("episodes"), fork).status == "active"


@pytest.mark.parametrize("payload, rule", [
    ({"score": 0.6}, "fork-confidence-threshold"),
    ({"parent_episode_id": "ghost"}, "fork-from-active-parent"),
    ({"labels": {"topics": ["trip"]}}, "fork-is-drift"),
])
def test_raw_fork_proposals_that_break_a_rule_are_refused(braid, payload, rule):
    proposal = {"fork_id": "f1", "parent_episode_id": "ep-trip", "labels": {"topics": ["visa"]},
                "score": 0.8, "rank": 1, "signal_id": "s", "ttl_knots": 8,
                "expires_at": "2025-03-01T09:15:00Z", **payload}
    with pytest.raises(Rejected, match=f"^delta 0: {rule}: "):
        braid.append(braidlog.delta(B, "fork_proposed", proposal, ts=T0))


def test_at_a_seq_after_the_ttl_shows_the_fork_expired_with_no_command(braid):
    fork = braid.execute(E.PROJECTION, E.ProposeForks(
        parent_episode_id="ep-trip", candidates=[cand(0.8, "visa")], signal_id="k1"),
        braid_id=B, now=T0)[0].delta.payload["fork_id"]
    before = braid.append(braidlog.delta(B, "message", {"text": "14 min"}, ts=T0 + timedelta(minutes=14)))
    after = braid.append(braidlog.delta(B, "message", {"text": "15 min"}, ts=T0 + timedelta(minutes=15)))
    assert E.fork_status(braid.at(before).state("episodes"), fork) == "fork_pending"
    assert E.fork_status(braid.at(after).state("episodes"), fork) == "linked"
    assert E.fork_status(braid.at(before).state("episodes"), fork,
                         T0 + timedelta(minutes=15)) == "linked"   # an explicit time
    assert [r.delta.kind for r in braid.log.scan()].count("fork_expired") == 0
