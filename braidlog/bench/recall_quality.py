"""The recall_quality workload of ``braidlog bench``: how often recall finds the right memory.

The set (``recall_quality.json`` beside this module, written for braidlog): 200 memories of the
kinds an agent stores (preferences, facts about people, decisions, tool results), each with a
question asked in other words ("What coffee does Maya drink?" for "Maya takes her coffee as an
oat milk flat white"). Every memory is appended with its vector, then every question is asked;
a question scores a hit@k when its memory is among the first k answers.

Rows, per embedder: hit@1 and hit@5 by meaning (``mode="vector"``) and fused with keywords
(``mode="hybrid"``); and BM25 alone (``mode="keyword"``) once. The embedders: the hashing
embedder always; WordLlama when it is installed (its weights ship in its wheel); every spec in
``$BRAIDLOG_BENCH_EMBEDDERS`` (comma-separated, e.g. ``model2vec:/models/potion-base-8M``); and
a few well-known models when they are in the local Hugging Face or fastembed cache. An embedder
that does not load here is named in the report's notes, with why. Nothing is downloaded.

The figures are fractions of the questions (deterministic for a given embedder); they measure
recall's ranking with each embedder on this set, not the embedders in general.
"""

from __future__ import annotations

import json
import os
from importlib import resources
from typing import TYPE_CHECKING, Any

from ..errors import BraidlogError
from .harness import Run, Sample

if TYPE_CHECKING:
    from ..recall import Mode

__all__ = ["WORKLOAD", "ENV", "STEPS", "load_set", "embedder_specs", "score", "run_workload"]

WORKLOAD = "recall_quality"
ENV = "BRAIDLOG_BENCH_EMBEDDERS"
STEPS = 1  # timed steps per repeat, for the progress bar
KEYWORD = "keyword (BM25)"
#: Models tried when their files are already on this machine (in the Hugging Face cache, or
#: fastembed's); none is fetched.
KNOWN = ("model2vec:minishlab/potion-base-8M", "sentence-transformers:sentence-transformers/all-MiniLM-L6-v2",
         "fastembed:BAAI/bge-small-en-v1.5")


def load_set() -> dict[str, Any]:
    """The labelled set: ``memories`` (id, kind, text) and ``questions`` (question, answer id)."""
    text = resources.files("braidlog.bench").joinpath("recall_quality.json").read_text(encoding="utf-8")
    return json.loads(text)


def embedder_specs(extra: str | None = None) -> list[str]:
    """The specs to score: hashing, wordllama, ``extra`` (or ``$BRAIDLOG_BENCH_EMBEDDERS``),
    then the well-known models, each once."""
    given = os.environ.get(ENV, "") if extra is None else extra
    specs = ["hashing", "wordllama", *(s.strip() for s in given.split(",") if s.strip()), *KNOWN]
    return list(dict.fromkeys(specs))


def score(embedder: Any, data: dict[str, Any] | None = None, *, modes: tuple[Mode, ...] = ("vector", "hybrid"),
          ks: tuple[int, ...] = (1, 5)) -> dict[str, dict[int, float]]:
    """``{mode: {k: fraction of questions whose memory is in the top k}}`` for ``embedder``
    (an embedder or a spec), over a store in memory."""
    from ..delta import delta
    from ..recall import Recall, append_embedded
    from ..recall import embedder as load
    from ..store import MemoryLog

    data = data or load_set()
    chosen = load(embedder)
    log = MemoryLog()
    memories = [delta("memories", "observation", {"text": m["text"]}, provenance="user", confidence=1.0)
                for m in data["memories"]]
    seqs = append_embedded(log, memories, chosen, space="quality")
    by_seq = {seq: m["id"] for seq, m in zip(seqs, data["memories"], strict=True)}
    index = Recall(log, "quality", embedder=chosen, directory=False)
    depth = max(ks)
    out: dict[str, dict[int, float]] = {}
    try:
        for mode in modes:
            ranks = []
            for q in data["questions"]:
                hits = index.recall(q["question"], depth, mode=mode, deltas=False)
                found = [by_seq.get(h.seq) for h in hits]
                ranks.append(found.index(q["answer"]) if q["answer"] in found else depth)
            out[mode] = {k: sum(r < k for r in ranks) / len(ranks) for k in ks}
    finally:
        index.close()
    return out


def run_workload(run: Run) -> list[Sample]:
    """One repeat: the cached scores of each embedder that loads here (they do not change)."""
    try:
        from ..recall import embedder as load
        from ..recall import identity
    except BraidlogError as e:  # the recall extra is missing
        run.skipped.append(f"{WORKLOAD}: {e}")
        return []
    if WORKLOAD not in run.cache:
        data = load_set()
        run.step(f"{WORKLOAD} · embedding {len(data['memories'])} memories and their questions")
        rows: list[Sample] = []
        keyword_done = False
        for spec in embedder_specs():
            try:
                chosen = load(spec)
            except BraidlogError as e:
                if spec not in KNOWN:  # a well-known model absent here is no news
                    run.skipped.append(f"{WORKLOAD}: {spec} not scored ({e})")
                continue
            modes: tuple[Mode, ...] = ("vector", "hybrid") + (() if keyword_done else ("keyword",))
            got = score(chosen, data, modes=modes)
            name = identity(chosen).name
            for mode, by_k in got.items():
                system = KEYWORD if mode == "keyword" else f"{name} · {mode}"
                for k, value in by_k.items():
                    rows.append(Sample(WORKLOAD, system, f"hit@{k}", round(100 * value, 1), "%", "higher"))
            keyword_done = True
        run.cache[WORKLOAD] = rows
    else:
        run.step(f"{WORKLOAD} · scored")
    return list(run.cache[WORKLOAD])
