"""Trust and hypotheses, after the Braid seed ("Trust model", "Hypotheses and tests").

Trust is orthogonal to provenance: provenance says where a delta came from, trust says how much
to believe it. A *subject* is anything trust is kept for: a dream-provenance delta, a bead version
written by a dream, a hypothesis, or any id an explicit ``TrustAssessed`` names.

Dream is hypothesis-first. Dream-provenance content is stored and recallable, but its confidence
starts at ``DREAM_CONFIDENCE`` (0.3) at most and halves every ``dream_half_life`` (1 day) unless
it is reinforced: a later non-dream delta that cites it as evidence (in ``refs.deltas``, or in
``refs.beads`` with role ``"evidence"``), or a passed test of the hypothesis. Reinforcement
restarts the decay clock; only promotion through tests lifts dream content above the cap.

A hypothesis's id is the id of the delta that proposed it, so any delta can cite it. Tests
(consistency, rederivation, outcome, and the best-effort grounding) are ``hypothesis`` deltas;
promotion requires every test the hypothesis was proposed with to have passed (the latest result
of each counts). A dream can propose, but never test or promote: no self-reinforcement.

Decay and promotability are pure functions of the state and an explicit ``as_of`` time; events
after ``as_of`` are ignored, and ``braid.at(t).state("trust")`` gives the state at any point.

Where to find what (each module one responsibility, imported in this order):

| module | holds |
|---|---|
| ``model`` | constants and ``TrustPolicy``, the payloads (declared in the registry), the state, ``evolve`` |
| ``queries`` | effective trust as of a time, test status, the trust formula (``hypothesis_trust``) |
| ``decide`` | the commands and the deltas they append |
| ``rules`` | every rule a delta must obey to enter the log, one function each; the boundary check |

docs/braid.md states every rule with its source in the seed and the reference.
"""

from __future__ import annotations

from braidlog import Decider

from .decide import (
    AssessTrust,
    PromoteHypothesis,
    ProposeHypothesis,
    RecordTest,
    RejectHypothesis,
    decide,
    dream_confidence,
)
from .model import (
    DEFAULT_POLICY,
    DEFAULT_REQUIRED_TESTS,
    DREAM_CONFIDENCE,
    DREAM_HALF_LIFE,
    KINDS,
    TESTS,
    Assessment,
    DecayPolicy,
    Hypothesis,
    HypothesisPromoted,
    HypothesisProposed,
    HypothesisRejected,
    HypothesisTested,
    Promotion,
    Reinforcement,
    Rejection,
    State,
    Subject,
    TestResult,
    TrustAssessed,
    TrustPolicy,
    evolve,
)
from .queries import (
    NO_EVIDENCE_SCORE,
    NO_TEST_SCORE,
    PROMOTION_THRESHOLD,
    PROVENANCE_WEIGHTS,
    TRUST_HALF_LIFE,
    HypothesisTrust,
    TrustView,
    confidence_at,
    hypothesis_status,
    hypothesis_trust,
    missing_tests,
    named_evidence,
    promotable,
    test_score,
    trust_of,
)
from .rules import checker

__all__ = [
    "DREAM_CONFIDENCE", "DREAM_HALF_LIFE", "TESTS", "DEFAULT_REQUIRED_TESTS",
    "TrustPolicy", "DEFAULT_POLICY",
    "DecayPolicy", "HypothesisProposed", "HypothesisTested", "HypothesisPromoted",
    "HypothesisRejected", "TrustAssessed", "KINDS",
    "Reinforcement", "Assessment", "Subject", "TestResult", "Promotion", "Rejection", "Hypothesis",
    "State", "evolve",
    "ProposeHypothesis", "RecordTest", "PromoteHypothesis", "RejectHypothesis", "AssessTrust",
    "decide", "dream_confidence", "checker",
    "TrustView", "trust_of", "confidence_at", "hypothesis_status", "missing_tests", "promotable",
    "PROVENANCE_WEIGHTS", "PROMOTION_THRESHOLD", "NO_TEST_SCORE", "NO_EVIDENCE_SCORE", "TRUST_HALF_LIFE",
    "HypothesisTrust", "hypothesis_trust", "named_evidence", "test_score",
    "decider", "PROJECTIONS",
]


def decider(policy: TrustPolicy = DEFAULT_POLICY) -> Decider:
    """The trust projection deciding under ``policy`` (the cap, half-life and required tests),
    its rules checked at the boundary under the same policy."""
    # version 3: the rules hold at the boundary (the state and fold are as in version 2);
    # version 4: the formula's evidence is the deltas a hypothesis names (promotions differ)
    return Decider(name="trust", version=4, initial=State(), evolve=evolve, state_type=State,
                   kinds=KINDS, refs=frozenset({"deltas", "beads"}), provenances=frozenset({"dream"}),
                   local=True, decide=lambda command, state, ctx: decide(command, state, ctx, policy),
                   check=checker(policy))


PROJECTIONS = [decider()]
