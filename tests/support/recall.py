"""Clustered random vectors and the deltas that carry them, for the recall tests."""

from __future__ import annotations

import numpy as np

import braidlog
from braidlog import Vector

from . import make_delta

DIM = 16
NOTE = "recall_test_note"  # an open kind (any JSON object) for payloads with namespace/workspace
if NOTE not in braidlog.REGISTRY:
    braidlog.declare(NOTE, None, owner="tests.test_recall")
SMALL = dict(block=64, fanout=2, ef=32, ef_construction=40)  # several block levels at ~1,000 vectors


def vectors(n: int, seed: int = 1, dim: int = DIM) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(20, dim))
    return (centres[rng.integers(0, 20, n)] + 0.4 * rng.normal(size=(n, dim))).astype(np.float32)


def deltas(x: np.ndarray, *, braids: int = 4, start: int = 0) -> list[braidlog.GenericDelta]:
    """One observation per row, braids b0..b3 in turn, every third tagged "odd", some without a vector."""
    out = []
    for i, row in enumerate(x, start=start):
        out.append(make_delta(i, braid=f"b{i % braids}", kind="observation",
                              payload={"text": f"row {i}", "data": {"i": i}},
                              tags=("odd",) if i % 3 == 1 else (), vector=Vector.of(row)))
        if i % 10 == 9:
            out.append(make_delta(i, braid="b0", kind="message"))  # no vector: seqs and positions differ
    return out


