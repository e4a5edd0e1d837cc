"""search_decisions: LedgerMind's strict / balanced / audit modes over the decisions projection."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

import braidlog
from braidlog import ValidationError
from braidlog.projections import decisions as D
from braidlog.projections.decision_search import search_decisions
from braidlog.projections.decisions import (
    DraftProposal,
    ProposalContent,
    RecordDecision,
    RejectProposal,
    SearchResultItem,
    SupersedeDecision,
)
from braidlog.recall import HashingEmbedder

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def run(braid, command, at: float = 0.0):
    return braid.execute(D.DECIDER, command, braid_id="b1", provenance="user",
                         now=T0 + timedelta(hours=at))


@pytest.fixture
def braid(tmp_path):
    """SQLite for the memory store, superseded by LMDB; React for the UI; a draft and a rejected proposal."""
    with braidlog.open(tmp_path / "store", projections=D.PROJECTIONS) as b:
        old = run(b, RecordDecision(title="Use SQLite for the memory store", target="memory store",
                                    rationale="One file and simple backups for the agent memory."))[0].delta.id
        new = run(b, SupersedeDecision(title="Use LMDB for the memory store", target="memory store",
                                       rationale="Appends dominate and audits need a hash chain.",
                                       old_decision_ids=[old]), 1)[0].delta.id
        ui = run(b, RecordDecision(title="Use React for the user interface", target="frontend",
                                   rationale="The team knows it and the widgets exist already."), 2)[0].delta.id
        other = run(b, RecordDecision(title="Use DuckDB for the memory store analytics", target="analytics",
                                      namespace="research",
                                      rationale="Columnar scans over exported memory store logs."), 3)[0].delta.id
        draft = run(b, DraftProposal(proposal=ProposalContent(
            title="Use PostgreSQL for the memory store", target="memory store", confidence=0.6,
            rationale="A server database for several agents sharing one memory store.")), 4)[0].delta.id
        rejected = run(b, DraftProposal(proposal=ProposalContent(
            title="Use PostgreSQL for the memory store", target="memory store", confidence=0.6,
            rationale="A server database for several agents sharing one memory store."),
            proposal_id=braidlog.new_id()), 5)[0].delta.id
        run(b, RejectProposal(proposal_id=rejected, reason="One process is enough for now."), 6)
        b.ids = dict(old=old, new=new, ui=ui, other=other, draft=draft, rejected=rejected)  # type: ignore[attr-defined]
        yield b


def relevance(query: str, target: str, title: str, rationale: str) -> float:
    e = HashingEmbedder()
    a, b = e.embed([query, f"{target}\n{title}\n{rationale}"])
    return float(a @ b)


def rrf(keyword_rank: int | None, meaning_rank: int) -> float:
    """Hybrid relevance by hand: reciprocal ranks (k = 60) over their largest sum, 2 / 61."""
    return (1 / (60 + meaning_rank) + (1 / (60 + keyword_rank) if keyword_rank else 0)) / (2 / 61)


def test_strict_returns_only_active_decisions(braid):
    got = search_decisions(braid, "SQLite memory store", mode="strict")
    assert all(isinstance(i, SearchResultItem) for i in got)
    assert {i.id for i in got} == {braid.ids["new"], braid.ids["other"]}
    assert {i.status for i in got} == {"active"} and {i.kind for i in got} == {"decision"}


def test_balanced_follows_supersede_to_the_active_head_and_weights_it(braid):
    got = search_decisions(braid, "SQLite one file simple backups", mode="balanced")
    ids = [i.id for i in got]
    assert braid.ids["old"] not in ids and ids.count(braid.ids["new"]) == 1
    head = next(i for i in got if i.id == braid.ids["new"])
    assert (head.status, head.preview, head.kind) == ("active", "Use LMDB for the memory store", "decision")
    state = braid.state("decisions")
    weight = D.rank_weight(state.decisions[braid.ids["new"]], state.last_ts)
    # the old record holds all four words of the query, no other record holds any: first by
    # keyword, and first by meaning too; fused relevance 1.0, times the head's weight
    assert got[0].id == braid.ids["new"] and head.score == pytest.approx(1.0 * weight, abs=1e-5)
    by_meaning = search_decisions(braid, "SQLite one file simple backups", match="vector")
    old = state.decisions[braid.ids["old"]]  # the old record matched; its head is returned
    want = relevance("SQLite one file simple backups", old.target, old.title, old.rationale)
    head = next(i for i in by_meaning if i.id == braid.ids["new"])
    assert head.score == pytest.approx(want * weight, abs=1e-5)


def test_balanced_penalises_rejected_proposals(braid):
    got = {i.id: i for i in search_decisions(braid, "PostgreSQL server database for several agents")}
    draft, rejected = got[braid.ids["draft"]], got[braid.ids["rejected"]]
    assert (draft.status, rejected.status, draft.kind) == ("draft", "rejected", "proposal")
    assert rejected.score == pytest.approx(draft.score * 0.2, rel=1e-4)
    assert list(got).index(braid.ids["draft"]) < list(got).index(braid.ids["rejected"])


def test_audit_returns_records_as_they_are(braid):
    got = {i.id: i for i in search_decisions(braid, "SQLite memory store", mode="audit", limit=50)}
    assert got[braid.ids["old"]].status == "superseded" and got[braid.ids["new"]].status == "active"
    assert got[braid.ids["rejected"]].status == "rejected"
    state = braid.state("decisions")
    old = state.decisions[braid.ids["old"]]
    by_meaning = {i.id: i for i in search_decisions(braid, "SQLite memory store", mode="audit",
                                                    limit=50, match="vector")}
    assert by_meaning[braid.ids["old"]].score == pytest.approx(
        relevance("SQLite memory store", old.target, old.title, old.rationale), abs=1e-5)
    # hybrid: the old record is first by keyword (it alone holds "SQLite", and "memory store"
    # twice) and first by meaning; relevance 1.0, unweighted in audit
    assert list(got)[0] == braid.ids["old"] and got[braid.ids["old"]].score == pytest.approx(1.0)


def test_an_exact_identifier_ranks_its_decision_first(tmp_path):
    """An error code in a decision's keywords (not in its text), asked for as an agent types it,
    alone or beside a word twelve other decisions hold: the decision is first."""
    with braidlog.open(tmp_path / "store", projections=D.PROJECTIONS) as b:
        for n in range(12):
            run(b, RecordDecision(title=f"Retry policy for the payment service, variant {n}",
                                  target=f"payments-{n}", rationale="Retry the payment call "
                                  "with backoff when the gateway times out or errors."), n)
        coded = run(b, RecordDecision(title="Page the on-call engineer", target="alerts",
                                      rationale="The nightly export must not fail silently.",
                                      keywords=["ERR-4711"]), 13)[0].delta.id
        for query in ("ERR 4711", "err-4711 retry"):
            assert search_decisions(b, query, mode="audit", limit=50)[0].id == coded, query
        assert [i.id for i in search_decisions(b, "ERR 4711", match="keyword")] == [coded]


def test_hybrid_fuses_the_two_rankings_by_reciprocal_rank(braid):
    """'PostgreSQL' is held by the draft and the rejected proposal alone (the same text: tied
    first by keyword, tied by meaning); their relevance is computed by hand from the ranks."""
    got = search_decisions(braid, "PostgreSQL", mode="audit", limit=50)
    ids = {braid.ids["draft"], braid.ids["rejected"]}
    assert {i.id for i in got[:2]} == ids
    draft = braid.state("decisions").proposals[braid.ids["draft"]].content
    cos = relevance("PostgreSQL", draft.target, draft.title, draft.rationale)
    by_meaning = search_decisions(braid, "PostgreSQL", mode="audit", limit=50, match="vector")
    higher = sum(1 for i in by_meaning if i.id not in ids and i.score > cos + 1e-6)
    want = rrf(1, 1 + higher)
    assert want < 1.0 or higher == 0
    assert [i.score for i in got[:2]] == pytest.approx([want, want], abs=1e-5)


@pytest.mark.parametrize("kw, field", [
    ({"query": ""}, "query"), ({"query": "   "}, "query"), ({"mode": "fuzzy"}, "mode"),
    ({"limit": 0}, "limit"), ({"limit": 51}, "limit"), ({"offset": -1}, "offset"),
    ({"match": "fuzzy"}, "match"),
])
def test_bad_requests_are_refused(braid, kw, field):
    args = {"query": "memory store", **kw}
    with pytest.raises(ValidationError) as e:
        search_decisions(braid, **args)
    assert e.value.field == field


def test_an_empty_store_finds_nothing():
    with braidlog.open(None, projections=D.PROJECTIONS) as b:
        assert search_decisions(b, "anything") == []
    assert np.isfinite(relevance("a", "b", "c", "d"))
