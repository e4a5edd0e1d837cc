"""The MerkleTree contract: the RFC 6962 tree over the committed forms, kept as the log grows.
Run against MemoryLog and LmdbLog."""

from __future__ import annotations

import pytest

from braidlog.proofs import consistency_proof, inclusion_proof, root
from braidlog.store import MerkleTree
from tests.support import make_delta
from tests.support.rfc9162 import Reference

ROLE = MerkleTree  # the ``log`` fixture (tests/store/conftest.py) checks each store implements it


def test_the_merkle_tree_is_rfc_6962_over_the_committed_forms(log):
    for start, n in ((0, 1), (1, 2), (3, 5), (8, 1), (9, 12)):  # nodes complete across batches
        log.append_batch([make_delta(i) for i in range(start, start + n)])
    ref = Reference.of_inputs([log.entry(seq) for seq in range(1, 22)])
    for size in range(1, 22):
        assert root(log, size) == ref.root(size)
        assert inclusion_proof(log, size, 21).path == ref.inclusion(size - 1, 21)
        assert consistency_proof(log, size, 21).path == ref.consistency(size, 21)
    with pytest.raises(IndexError):
        log.tree_hashes([(0, 21)])
    with pytest.raises(IndexError):
        log.tree_hashes([(3, 2)])
