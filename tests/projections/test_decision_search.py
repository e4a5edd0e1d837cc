"""search_decisions: LedgerMind's strict / balanced / audit modes over the decisions projection."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

import braidlog
from braidlog import ValidationError
from braidlog.recall import HashingEmbedder
from braidlog.projections import decisions as D
from braidlog.projections.decision_search import search_decisions
from braidlog.projections.decisions import (
    DraftProposal, ProposalContent, RecordDecision, RejectProposal, SearchResultItem, SupersedeDecision,
)

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


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
    old = state.decisions[braid.ids["old"]]  # the old record matched; its head is returned
    want = relevance("SQLite one file simple backups", old.target, old.title, old.rationale)
    want *= D.rank_weight(state.decisions[braid.ids["new"]], state.last_ts)
    assert head.score == pytest.approx(want, abs=1e-5)


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
    assert got[braid.ids["old"]].score == pytest.approx(
        relevance("SQLite memory store", old.target, old.title, old.rationale), abs=1e-5)


def test_namespace_and_paging(braid):
    every = search_decisions(braid, "memory store", mode="audit", limit=50)
    assert braid.ids["other"] in {i.id for i in every}
    only = search_decisions(braid, "memory store", mode="audit", namespace="research")
    assert [i.id for i in only] == [braid.ids["other"]]
    assert search_decisions(braid, "memory store", namespace="nowhere") == []
    pages = [search_decisions(braid, "memory store", mode="audit", limit=2, offset=o) for o in (0, 2, 4)]
    assert [i.id for p in pages for i in p] == [i.id for i in every][:6]
    assert [i.score for i in every] == sorted((i.score for i in every), reverse=True)
    assert search_decisions(braid, "memory store", mode="audit", offset=len(every)) == []


def test_unrelated_query_finds_nothing(braid):
    assert search_decisions(braid, "weather in Lisbon tomorrow", mode="audit") == []


def test_as_of_a_view_searches_the_decisions_then(braid):
    before = braid.at(1)  # only the SQLite decision, still active
    got = search_decisions(before, "memory store", mode="strict")
    assert [i.id for i in got] == [braid.ids["old"]] and got[0].status == "active"


def test_a_chain_deeper_than_20_yields_nothing_in_balanced(tmp_path):
    with braidlog.open(tmp_path / "store", projections=D.PROJECTIONS) as b:
        first = run(b, RecordDecision(title="Original quokka cache policy", target="cache policy",
                                      rationale="Keep everything for one day, then evict."))[0].delta.id
        prev = first
        for n in range(1, 22):
            prev = run(b, SupersedeDecision(title=f"Cache policy revision {n}", target="cache policy",
                                            rationale=f"Revision number {n} of the eviction rule.",
                                            old_decision_ids=[prev]), n)[0].delta.id
        assert [i.id for i in search_decisions(b, "quokka", mode="audit")] == [first]
        assert search_decisions(b, "quokka", mode="balanced") == []  # 21 links: too deep


def test_a_short_chain_resolves_in_balanced(tmp_path):
    with braidlog.open(tmp_path / "store", projections=D.PROJECTIONS) as b:
        first = run(b, RecordDecision(title="Original quokka cache policy", target="cache policy",
                                      rationale="Keep everything for one day, then evict."))[0].delta.id
        head = run(b, SupersedeDecision(title="Cache policy revision", target="cache policy",
                                        rationale="Keep everything for one hour, then evict.",
                                        old_decision_ids=[first]), 1)[0].delta.id
        assert [i.id for i in search_decisions(b, "quokka", mode="balanced")] == [head]


@pytest.mark.parametrize("kw, field", [
    ({"query": ""}, "query"), ({"query": "   "}, "query"), ({"mode": "fuzzy"}, "mode"),
    ({"limit": 0}, "limit"), ({"limit": 51}, "limit"), ({"offset": -1}, "offset"),
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
