"""The Merkle tree, its roots and its proofs against a brute-force RFC 9162 (tests/rfc9162.py)."""

from __future__ import annotations

import os
import random
from functools import lru_cache

import lmdb
import pytest

from braidlog import IntegrityError, LmdbLog, MemoryLog, StorageError, ValidationError
from braidlog import tree as merkle
from braidlog.proofs import consistency_proof, inclusion_proof, root
from braidlog.proofs.verify import (
    VerificationError, leaf_hash, verify_consistency, verify_inclusion,
)

from .conftest import make_delta
from .rfc9162 import Reference

N = 300


class NodeStore:
    """The tree of a leaf list kept as braidlog keeps it (a Frontier's nodes), no store."""

    def __init__(self, leaves: list[bytes]) -> None:
        self.leaves = leaves
        self.nodes: dict[tuple[int, int], bytes] = {}
        f = merkle.Frontier()
        for leaf in leaves:
            for level, index, h in f.push(leaf):
                self.nodes[(level, index)] = h

    def tree_hashes(self, nodes):
        return [self.leaves[i] if lv == 0 else self.nodes[(lv, i)] for lv, i in nodes]

    def root(self, size):
        return merkle.resolve([(0, size)], self.tree_hashes)[0] if size else merkle.EMPTY_ROOT

    def inclusion(self, index, size):
        return merkle.resolve(merkle.inclusion_ranges(index, size), self.tree_hashes)

    def consistency(self, old, new):
        return merkle.resolve(merkle.consistency_ranges(old, new), self.tree_hashes)


@lru_cache(maxsize=1)
def big_leaves() -> tuple[list[bytes], NodeStore, Reference]:
    rnd = random.Random(16)
    leaves = [leaf_hash(rnd.randbytes(rnd.randrange(1, 40))) for _ in range(100_000)]
    return leaves, NodeStore(leaves), Reference(leaves)


def small() -> tuple[NodeStore, Reference]:
    leaves = big_leaves()[0][:N]
    return NodeStore(leaves), Reference(leaves)


def test_empty_tree_root_is_the_hash_of_nothing():
    from blake3 import blake3
    assert merkle.EMPTY_ROOT == blake3(b"").digest() == Reference([]).root(0)
    assert root(MemoryLog()) == merkle.EMPTY_ROOT


def test_every_root_of_every_size_up_to_300():
    nodes, ref = small()
    for size in range(0, N + 1):
        assert nodes.root(size) == ref.root(size), size


def test_every_inclusion_proof_of_every_size_up_to_300():
    nodes, ref = small()
    for size in range(1, N + 1):
        r = ref.root(size)
        for index in range(size):
            path = nodes.inclusion(index, size)
            assert path == ref.inclusion(index, size), (index, size)
            verify_inclusion(index, size, ref.leaves[index], path, r)


def test_every_consistency_proof_of_every_size_pair_up_to_300():
    nodes, ref = small()
    for new in range(1, N + 1):
        new_root = ref.root(new)
        for old in range(1, new + 1):
            path = nodes.consistency(old, new)
            assert path == ref.consistency(old, new), (old, new)
            verify_consistency(old, new, ref.root(old), new_root, path)


def test_random_sizes_up_to_100000_match_the_reference():
    leaves, nodes, ref = big_leaves()
    rnd = random.Random(9162)
    for _ in range(300):
        size = rnd.randrange(1, len(leaves) + 1)
        index = rnd.randrange(size)
        old = rnd.randrange(1, size + 1)
        assert nodes.root(size) == ref.root(size)
        path = nodes.inclusion(index, size)
        assert path == ref.inclusion(index, size)
        verify_inclusion(index, size, leaves[index], path, ref.root(size))
        cpath = nodes.consistency(old, size)
        assert cpath == ref.consistency(old, size)
        verify_consistency(old, size, ref.root(old), ref.root(size), cpath)
    # the edges: powers of two and their neighbours, the first and last leaves
    for size in (2**16 - 1, 2**16, 2**16 + 1, 100_000):
        for index in (0, size // 2, size - 1):
            assert nodes.inclusion(index, size) == ref.inclusion(index, size)
        for old in (1, 2**15, 2**16 - 1, 2**16, size - 1, size):
            if old <= size:
                assert nodes.consistency(old, size) == ref.consistency(old, size)


def test_a_wrong_proof_is_refused():
    nodes, ref = small()
    rnd = random.Random(7)
    for _ in range(200):
        size = rnd.randrange(2, N + 1)
        index = rnd.randrange(size)
        path = nodes.inclusion(index, size)
        r = ref.root(size)
        other = (index + rnd.randrange(1, size)) % size
        with pytest.raises(VerificationError):  # another leaf, same path
            verify_inclusion(index, size, ref.leaves[other], path, r)
        if path:  # any path hash changed
            i = rnd.randrange(len(path))
            bad = path[:i] + [bytes([path[i][0] ^ 1]) + path[i][1:]] + path[i + 1:]
            with pytest.raises(VerificationError):
                verify_inclusion(index, size, ref.leaves[index], bad, r)
            with pytest.raises(VerificationError, match="too short"):
                verify_inclusion(index, size, ref.leaves[index], path[:-1], r)
        with pytest.raises(VerificationError):
            verify_inclusion(index, size, ref.leaves[index], path + [r], r)
        old = rnd.randrange(1, size)
        cpath = nodes.consistency(old, size)
        with pytest.raises(VerificationError):
            verify_consistency(old, size, ref.root(old - 1) if old > 1 else r, r, cpath)
        with pytest.raises(VerificationError):
            verify_consistency(old, size, ref.root(old), ref.root(size - 1), cpath)
        with pytest.raises(VerificationError):
            verify_consistency(old, size, ref.root(old), r, cpath[:-1])


def test_equal_sizes_are_consistent_only_with_equal_roots_and_an_empty_path():
    nodes, ref = small()
    verify_consistency(5, 5, ref.root(5), ref.root(5), [])
    with pytest.raises(VerificationError, match="two different roots"):
        verify_consistency(5, 5, ref.root(5), ref.root(6), [])
    with pytest.raises(VerificationError, match="must be empty"):
        verify_consistency(5, 5, ref.root(5), ref.root(5), [ref.root(5)])


def test_nodes_are_numbered_in_the_order_appends_complete_them():
    f = merkle.Frontier()
    positions = []
    for size in range(1, 600):
        positions += [merkle.position((lv, ix)) for lv, ix, _ in f.push(bytes(32))]
        assert (positions[-1] if positions else -1) == merkle.last_position(size)
    assert positions == sorted(set(positions))
    assert max(len(f.push(bytes(32))) for _ in range(1024)) <= 11  # at most log2(n) a leaf


# -- through the stores ------------------------------------------------------------------------

def _bodies(store) -> list[bytes]:
    return [body for _, _, body in store.scan_bodies()]


@pytest.fixture(params=["memory", "lmdb"])
def filled(request, tmp_path):
    store = MemoryLog() if request.param == "memory" else LmdbLog(tmp_path / "s", durable=False)
    rnd = random.Random(3)
    i = 0
    while i < 140:  # batches of every size, so nodes complete inside and across batches
        n = rnd.randrange(1, 9)
        store.append_batch([make_delta(j) for j in range(i, i + n)])
        i += n
    yield store
    store.close()


def test_store_roots_and_proofs_match_the_reference_over_the_stored_bytes(filled):
    ref = Reference.of_inputs(_bodies(filled))
    head = filled.head().seq
    for size in range(1, head + 1):
        assert root(filled, size) == ref.root(size)
        for seq in range(1, size + 1, 7):
            p = inclusion_proof(filled, seq, size)
            assert (p.leaf_hash, p.path, p.root) == (ref.leaves[seq - 1], ref.inclusion(seq - 1, size),
                                                     ref.root(size))
        for old in range(1, size + 1, 5):
            c = consistency_proof(filled, old, size)
            assert (c.old_root, c.new_root, c.path) == (ref.root(old), ref.root(size),
                                                        ref.consistency(old, size))
    assert root(filled) == ref.root(head)
    assert inclusion_proof(filled, 1).tree_size == head


def test_an_altered_record_breaks_its_inclusion_proof(filled):
    p = inclusion_proof(filled, 17)
    body = filled.body(17)
    verify_inclusion(16, p.tree_size, leaf_hash(body), p.path, p.root)
    for i in (0, 8, len(body) - 1):
        altered = body[:i] + bytes([body[i] ^ 0x40]) + body[i + 1:]
        with pytest.raises(VerificationError, match="not"):
            verify_inclusion(16, p.tree_size, leaf_hash(altered), p.path, p.root)


def test_proof_arguments_are_checked(filled):
    head = filled.head().seq
    for bad in (0, head + 1, -1, True, "3"):
        with pytest.raises(ValidationError, match="seq"):
            inclusion_proof(filled, bad)
    with pytest.raises(ValidationError, match="size"):
        inclusion_proof(filled, 1, head + 1)
    with pytest.raises(ValidationError, match="old_size"):
        consistency_proof(filled, 0)
    with pytest.raises(ValidationError, match="old_size"):
        consistency_proof(filled, 5, 4)
    with pytest.raises(ValidationError, match="size"):
        root(filled, head + 1)


def test_verify_finds_a_changed_tree_node(tmp_path):
    path = tmp_path / "s"
    with LmdbLog(path) as store:
        store.append_batch([make_delta(i) for i in range(40)])
        assert store.verify().seq == 40
    env = lmdb.open(str(path), max_dbs=16)
    with env.begin(write=True) as txn:
        db = env.open_db(b"tree", txn=txn)
        key = merkle.position((3, 2)).to_bytes(8, "big")
        value = txn.get(key, db=db)
        txn.put(key, bytes([value[0] ^ 1]) + value[1:], db=db)
    env.close()
    with LmdbLog(path) as store:
        with pytest.raises(IntegrityError, match=r"Merkle tree node \(3, 2\) over seqs 17..24"):
            store.verify()
        with pytest.raises(IntegrityError, match=r"node \(4, 1\)"):  # built on the damaged peak
            store.verify(25)
        assert store.verify(33).seq == 40  # a range past every node built on it


def test_append_refuses_a_tree_that_does_not_end_at_the_head(tmp_path):
    path = tmp_path / "s"
    with LmdbLog(path) as store:
        store.append_batch([make_delta(i) for i in range(8)])
    env = lmdb.open(str(path), max_dbs=16)
    with env.begin(write=True) as txn:
        db = env.open_db(b"tree", txn=txn)
        txn.delete(merkle.last_position(8).to_bytes(8, "big"), db=db)
    env.close()
    with LmdbLog(path) as store:
        with pytest.raises(IntegrityError, match="does not end at the log's head"):
            store.append(make_delta(9))
        assert store.head().seq == 8


def _downgrade_to_format_1(path) -> None:
    """Make a store what braidlog's format 1 wrote: no tree, no notes, format 1."""
    env = lmdb.open(str(path), max_dbs=16)
    with env.begin(write=True) as txn:
        for name in (b"tree", b"notes"):
            txn.drop(env.open_db(name, txn=txn), delete=True)
        txn.put(b"format", b"1", db=env.open_db(b"meta", txn=txn))
    env.close()


def test_a_format_1_store_gets_its_tree_when_opened_writable(tmp_path):
    path = tmp_path / "s"
    deltas = [make_delta(i) for i in range(77)]
    with LmdbLog(path) as store:
        store.append_batch(deltas)
    _downgrade_to_format_1(path)
    with LmdbLog(path, readonly=True) as old:  # read-only: readable, verifiable, no proofs
        assert old.format_version == 1
        assert old.verify().seq == 77
        assert old.notes() == []
        with pytest.raises(StorageError, match="predates the Merkle tree"):
            root(old)
    with LmdbLog(path) as store:  # writable: upgraded in place, in one transaction
        assert store.format_version >= 2
        mem = MemoryLog()
        mem.append_batch(deltas)
        for size in (1, 2, 3, 64, 77):
            assert root(store, size) == root(mem, size)
        assert store.verify().seq == 77
        more = make_delta(77)
        store.append(more)
        mem.append(more)
        assert root(store) == root(mem)
    with LmdbLog(path, readonly=True) as store:
        assert store.format_version >= 2 and root(store) == root(mem)


@pytest.mark.slow
def test_a_large_lmdb_store_matches_the_reference(tmp_path):
    with LmdbLog(tmp_path / "s", durable=False) as store:
        rnd = random.Random(int(os.environ.get("BRAIDLOG_SEED", "5")))
        for start in range(0, 20_000, 1000):
            store.append_batch([make_delta(i) for i in range(start, start + 1000)])
        ref = Reference.of_inputs(_bodies(store))
        for _ in range(300):
            size = rnd.randrange(1, 20_001)
            seq = rnd.randrange(1, size + 1)
            assert inclusion_proof(store, seq, size).path == ref.inclusion(seq - 1, size)
            old = rnd.randrange(1, size + 1)
            assert consistency_proof(store, old, size).path == ref.consistency(old, size)
        assert store.verify().seq == 20_000
