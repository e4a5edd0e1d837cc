"""Demo piece: a decision recorded, used, superseded through a ResolutionIntent (a competing
decision named through a target alias conflicts with it); a proposal accepted.

Decision and proposal ids are derived from ``start`` so the piece is deterministic (and a
second run with the same ``start`` records nothing new: the commands are already done).
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any

from ulid import ULID

import braidlog
from braidlog import Provenance
from braidlog.projections import decisions as D
from braidlog.projections.demos import session_braid

__all__ = ["write"]


def _ulid(at: datetime, label: str) -> str:
    """A ULID for ``at`` whose random part is a hash of ``label`` and ``at``."""
    ms = int(at.timestamp() * 1000)
    tail = hashlib.blake2b(f"{label}@{at.isoformat()}".encode(), digest_size=10).digest()
    return str(ULID.from_bytes(ms.to_bytes(6, "big") + tail))



def write(braid: braidlog.Braid, start: datetime, braid_id: str | None = None) -> list[str]:
    """Append the scripted decisions piece; a few lines saying what it shows.

    Its decisions live in a namespace named after ``start``, so every run of the demo
    writes into a store of its own without meeting the decisions of earlier runs.
    """
    braid_id = braid_id or session_braid(braid, f"demo-{start:%Y%m%dT%H%M%S}")
    namespace = f"demo-{start:%Y%m%dT%H%M%S.%f}"
    human = Provenance("user", source="cli")
    agent = Provenance("assistant", model="demo-llm")
    at = [start + timedelta(minutes=m) for m in range(10)]

    def run(command: Any, i: int, who: Provenance | str) -> D.MemoryDecision:
        return D.execute(braid, command, braid_id=braid_id, provenance=who, now=at[i])

    pg_id, lmdb_id = _ulid(at[0], "postgres"), _ulid(at[5], "lmdb")
    proposal_id, accepted_id = _ulid(at[7], "proposal"), _ulid(at[8], "accepted")
    lines = []

    first = run(D.RecordDecision(
        title="Use PostgreSQL for agent memory", target="memory_store", scope=D.PatternScope.INFRA,
        rationale="A server database gives transactions and SQL queries over memories.",
        consequences=["run a database server next to the agent"], decision_id=pg_id,
        namespace=namespace), 0, human)
    lines.append(f"decisions: a human recorded {pg_id} 'Use PostgreSQL for agent memory' on target "
                 f"memory_store ({first.reason})")
    for i, episode in ((1, "episode-setup"), (2, "episode-migrations")):
        run(D.UseDecision(decision_id=pg_id, context=episode, note="schema created"), i, agent)
    run(D.RegisterTargetAlias(alias="agent_memory", target="memory_store"), 3, human)
    refused = run(D.RecordDecision(
        title="Use SQLite", target="Agent_Memory", namespace=namespace,
        rationale="One file next to the agent, nothing to operate."), 4, agent)
    lines.append(f"decisions: an agent's competing decision on 'Agent_Memory' (an alias of memory_store) "
                 f"was refused: {refused.reason}")
    intent = D.ResolutionIntent(resolution_type="supersede", target_decision_ids=[pg_id],
                                rationale="An embedded log removes the server and keeps an audit chain.")
    run(D.RecordDecision(
        title="Use an embedded LMDB log", target="memory_store", scope=D.PatternScope.INFRA,
        rationale="Append-only, hash-chained, replayable to any point; no server to run.",
        intent=intent, decision_id=lmdb_id, namespace=namespace), 5, human)
    state = braid.state("decisions")
    old, new = state.decisions[pg_id], state.decisions[lmdb_id]
    lines.append(f"decisions: a human superseded it through a ResolutionIntent: {pg_id} is {old.status} "
                 f"with superseded_by {old.superseded_by}, and {lmdb_id} lists supersedes {new.supersedes}")
    run(D.DraftProposal(proposal_id=proposal_id, proposal=D.ProposalContent(
        title="Keep the recall index in hnswlib", target="recall_index", confidence=0.6,
        namespace=namespace,
        rationale="An HNSW index beside the log answers recall fast and can be rebuilt from it.",
        strengths=["rebuildable from the log"], suggested_consequences=["persist the index seq"])),
        7, agent)
    accepted = run(D.AcceptProposal(proposal_id=proposal_id, decision_id=accepted_id), 8, human)
    lines.append(f"decisions: the agent drafted proposal {proposal_id}; a human accepted it "
                 f"({accepted.reason})")
    later = at[0] + timedelta(days=45)
    s = D.stream(braid.state("decisions"), pg_id, later)
    assert s is not None  # recorded above
    lines.append(f"decisions: stream {pg_id} as of 45 days on: {s.status}, {s.phase.value}, "
                 f"{s.vitality.value}, frequency {s.frequency} in {s.unique_contexts} contexts, "
                 f"confidence {s.confidence:.2f}")
    return lines
