"""The seed rules of trust (Braid, seed 004), typed memories (typedmem, seed 002) and decisions
(LedgerMind) hold on every path a delta takes in: ``Braid.append``, ``append_batch``, the CLI's
``append``, ``import`` and the MCP ``append`` tool. Each case is a store holding some facts and
one delta that breaks a rule; every path refuses it naming the rule, and writes nothing.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
import pytest

import braidlog
from braidlog import GenericDelta, LmdbLog, Provenance, Refs
from braidlog.cli import main

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _d(kind: str, payload: dict, *, prov: str = "user", conf: float = 0.9, at: int = 0,
       own: str | None = None, refs: Refs | None = None) -> GenericDelta:
    """A delta; ``own`` names the payload field that must carry the delta's own id."""
    d = GenericDelta(braid_id="b", kind=kind, ts=T0 + timedelta(seconds=at), provenance=Provenance(prov),
                     confidence=conf, payload=payload, refs=refs)
    if own is not None:
        d = msgspec.structs.replace(d, payload={**payload, own: d.id})
    return d


def _proposal(at: int = 0) -> GenericDelta:
    return _d("hypothesis", {"type": "HypothesisProposed", "hypothesis_id": "", "statement": "Mornings.",
                             "required_tests": ["consistency", "outcome"]}, own="hypothesis_id", at=at)


def _preference(subject: str = "user", at: int = 0, content: str = "likes tea") -> GenericDelta:
    return _d("memory_added", {"id": braidlog.new_id(), "type": "preference", "content": content,
                               "confidence": 0.8, "workspace": "default",
                               "timestamp": (T0 + timedelta(seconds=at)).isoformat(), "subject": subject,
                               "half_life_days": 60.0}, at=at)


def _decision(target: str, at: int, supersedes: tuple[str, ...] = ()) -> GenericDelta:
    return _d("decision_recorded", {"decision_id": "", "title": f"On {target}", "target": target,
                                    "rationale": "Because it is the simplest thing.",
                                    "supersedes": list(supersedes)}, own="decision_id", at=at)


def _case_never_proposed() -> tuple[list[GenericDelta], GenericDelta, str]:
    ghost = braidlog.new_id()
    return [], _d("hypothesis", {"type": "HypothesisPromoted", "hypothesis_id": ghost, "confidence": 0.8,
                                 "tests": [braidlog.new_id()]}, at=5), "hypothesis_known"


def _case_no_test_passed() -> tuple[list[GenericDelta], GenericDelta, str]:
    h = _proposal()
    hid = h.payload["hypothesis_id"]
    return [h], _d("hypothesis", {"type": "HypothesisPromoted", "hypothesis_id": hid, "confidence": 0.5,
                                  "tests": []}, at=5), "required_tests_passed"


def _case_second_preference() -> tuple[list[GenericDelta], GenericDelta, str]:
    return [_preference(at=0)], _preference(at=5, content="likes coffee"), "conflict_policy"


def _case_dream_above_cap() -> tuple[list[GenericDelta], GenericDelta, str]:
    return [], _d("message", {"text": "I dreamt it"}, prov="dream", conf=0.9, at=5), "dream_starts_low"


def _case_dream_tests() -> tuple[list[GenericDelta], GenericDelta, str]:
    h = _proposal()
    t = _d("hypothesis", {"type": "HypothesisTested", "hypothesis_id": h.payload["hypothesis_id"],
                          "test_id": "", "test": "outcome", "passed": True, "reward": 1.0},
           prov="dream", conf=0.3, own="test_id", at=5)
    return [h], t, "dream_never_validates"


def _case_unknown_subject() -> tuple[list[GenericDelta], GenericDelta, str]:
    return [], _d("trust", {"type": "TrustAssessed", "subject_id": "nothing-known", "confidence": 0.5},
                  at=5), "subject_known"


def _case_update_unknown_memory() -> tuple[list[GenericDelta], GenericDelta, str]:
    return [_preference()], _d("memory_updated", {"id": "no-such-memory", "content": "x"}, at=5), "memory_known"


def _case_supersede_across_targets() -> tuple[list[GenericDelta], GenericDelta, str]:
    a, b = _decision("database", 0), _decision("cache", 1)
    bad = _decision("cache", 5, supersedes=(a.payload["decision_id"], b.payload["decision_id"]))
    return [a, b], bad, "supersede_same_target"


CASES = {
    "promotion-of-a-hypothesis-never-proposed": _case_never_proposed,
    "promotion-with-no-required-test-passed": _case_no_test_passed,
    "second-active-preference-in-a-replace-slot": _case_second_preference,
    "dream-content-above-the-cap": _case_dream_above_cap,
    "a-dream-testing-a-hypothesis": _case_dream_tests,
    "trust-for-an-unknown-subject": _case_unknown_subject,
    "update-of-an-unknown-memory": _case_update_unknown_memory,
    "supersede-across-targets": _case_supersede_across_targets,
}


def _store(path: Path, deltas: list[GenericDelta]) -> int:
    with braidlog.open(path) as b:
        if deltas:
            b.append_batch(deltas)
        return b.head().seq


def _head(path: Path) -> int:
    with LmdbLog(path, create=False) as log:
        return log.head().seq


@pytest.mark.parametrize("case", CASES)
def test_braid_append_and_append_batch_refuse(case, tmp_path):
    setup, bad, rule = CASES[case]()
    seq = _store(tmp_path / "s", setup)
    with braidlog.open(tmp_path / "s") as b:
        with pytest.raises(braidlog.BraidlogError, match=rule):
            b.append(bad)
        note = _d("message", {"text": "a note"}, at=4)
        with pytest.raises(braidlog.BraidlogError, match=f"delta 1: .*{rule}"):
            b.append_batch([note, bad])
        assert b.head().seq == seq, "nothing of a refused batch is written"


@pytest.mark.parametrize("case", CASES)
def test_cli_append_and_import_refuse(case, tmp_path, capsys):
    setup, bad, rule = CASES[case]()
    seq = _store(tmp_path / "s", setup)
    f = tmp_path / "bad.json"
    f.write_text(braidlog.to_json(bad).decode())
    capsys.readouterr()
    assert main(["--store", str(tmp_path / "s"), "append", str(f)]) != 0
    assert rule in capsys.readouterr().err
    assert _head(tmp_path / "s") == seq
    # import: the same facts and the bad delta, exported from a bare store that took them all
    with braidlog.open(tmp_path / "bare", projections=[]) as bare:
        bare.append_batch([*setup, bad])
    export = tmp_path / "export.jsonl"
    assert main(["--store", str(tmp_path / "bare"), "export", str(export)]) == 0
    capsys.readouterr()
    assert main(["--store", str(tmp_path / "dst"), "import", str(export)]) != 0
    assert rule in capsys.readouterr().err
    assert not (tmp_path / "dst").exists(), "a refused import into a new store leaves nothing"


MCP_CASES = ["promotion-of-a-hypothesis-never-proposed", "promotion-with-no-required-test-passed",
             "second-active-preference-in-a-replace-slot", "dream-content-above-the-cap",
             "trust-for-an-unknown-subject", "update-of-an-unknown-memory"]


def test_the_mcp_append_tool_refuses(tmp_path):
    """The MCP `append` tool stamps its own id and time, so each case's delta goes in as its
    payload under a fresh envelope; a supersede across targets goes through `supersede_decision`."""
    pytest.importorskip("mcp")
    from tests.support.mcp import stdio

    stores = {}
    for name in MCP_CASES:
        setup, bad, rule = CASES[name]()
        path = tmp_path / name
        stores[name] = (path, _store(path, setup), bad, rule)
    for name, (path, seq, bad, rule) in stores.items():
        with stdio(path) as s:
            payload = dict(bad.payload)
            if bad.kind == "memory_added":
                payload["timestamp"] = datetime.now(UTC).isoformat()
            text = s.error("append", {"braid_id": "b", "kind": bad.kind, "payload": payload,
                                      "confidence": bad.confidence,
                                      # the server lets callers claim tool or dream, not user
                                      "provenance": {"kind": "dream" if bad.provenance.kind == "dream"
                                                     else "tool"}})
            assert rule in text, (name, text)
        assert _head(path) == seq, name
    # a supersede across targets, through the decision tool
    setup, _, rule = _case_supersede_across_targets()
    path = tmp_path / "supersede"
    seq = _store(path, setup)
    with stdio(path) as s:
        text = s.error("supersede_decision", {
            "title": "Use Redis", "target": "cache", "rationale": "Because it is the simplest thing.",
            "old_decision_ids": [d.payload["decision_id"] for d in setup]})
        assert "no longer active for target 'cache'" in text
    assert _head(path) == seq


def test_the_cli_append_refusal_names_the_rule_in_json_form(tmp_path, capsys):
    """The same delta as a JSON line a shell user writes: refused with the rule's words."""
    seq = _store(tmp_path / "s", [])
    line = {"braid_id": "b", "kind": "hypothesis", "ts": "2026-01-01T00:00:05Z",
            "provenance": {"kind": "user"}, "confidence": 0.9,
            "payload": {"type": "HypothesisPromoted", "hypothesis_id": braidlog.new_id(),
                        "confidence": 0.8, "tests": []}}
    f = tmp_path / "promote.json"
    f.write_text(json.dumps(line))
    capsys.readouterr()
    assert main(["--store", str(tmp_path / "s"), "append", str(f)]) != 0
    err = capsys.readouterr().err
    assert "hypothesis_known: cannot promote hypothesis" in err and "never proposed" in err
    assert _head(tmp_path / "s") == seq
