"""``braidlog bench --only recall_quality``: the labelled set the project ships, and hit@1 and
hit@5 for the hashing embedder, each real model installed (WordLlama in the test extra) and BM25."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("braidlog.recall")

from braidlog.bench.recall_quality import KNOWN, embedder_specs, load_set, score
from braidlog.cli import main


def test_the_set_is_a_few_hundred_memories_each_with_a_question_in_other_words():
    data = load_set()
    memories, questions = data["memories"], data["questions"]
    assert len(memories) == len(questions) == 200
    ids = [m["id"] for m in memories]
    assert len(set(ids)) == len(ids) and {q["answer"] for q in questions} == set(ids)
    assert {m["kind"] for m in memories} == {"preference", "person", "decision", "tool_result"}
    words = re.compile(r"\w+")
    text = {m["id"]: set(words.findall(m["text"].lower())) for m in memories}
    for q in questions:  # asked in other words: never the memory's own sentence
        asked = set(words.findall(q["question"].lower()))
        assert asked != text[q["answer"]] and len(asked - text[q["answer"]]) >= 2, q


def test_hashing_and_bm25_score_the_same_on_every_run():
    a, b = score("hashing", modes=("vector", "keyword")), score("hashing", modes=("vector", "keyword"))
    assert a == b and all(0 < v[1] <= v[5] < 1 for v in a.values())


def test_a_real_model_finds_more_than_hashing():
    pytest.importorskip("wordllama", reason="wordllama is in the test extra: pip install '.[test]'")
    hashing, real = score("hashing", modes=("vector",)), score("wordllama", modes=("vector",))
    assert real["vector"][1] > hashing["vector"][1] + 0.1 and real["vector"][5] > hashing["vector"][5] + 0.2


def test_the_specs_scored(monkeypatch):
    monkeypatch.setenv("BRAIDLOG_BENCH_EMBEDDERS", "hashing:128, model2vec:/models/x")
    assert embedder_specs() == ["hashing", "wordllama", "hashing:128", "model2vec:/models/x", *KNOWN]


def test_the_bench_command_reports_hit_at_1_and_5(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("BRAIDLOG_BENCH_EMBEDDERS", f"model2vec:{tmp_path / 'absent'}")
    code = main(["bench", "--quick", "--json", "--repeat", "1", "--only", "recall_quality", "--dir", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    rows = {(r["system"], r["metric"]): r for r in doc["rows"] if r["workload"] == "recall_quality"}
    systems = {s for s, _ in rows}
    assert {"hashing-v1-512 · vector", "hashing-v1-512 · hybrid", "keyword (BM25)"} <= systems
    assert all(m in ("hit@1", "hit@5") for _, m in rows)
    assert rows[("hashing-v1-512 · vector", "hit@1")]["unit"] == "%"
    assert any(f"recall_quality: model2vec:{tmp_path / 'absent'} not scored" in s for s in doc["skipped"])
