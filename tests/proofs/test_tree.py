"""The Merkle tree, its roots and its proofs against a brute-force RFC 6962 tree (tests/rfc9162.py)."""

from __future__ import annotations

import hashlib
import os
import random
from functools import lru_cache

import lmdb
import pytest

from braidlog import IntegrityError, LmdbLog, MemoryLog, StorageError, ValidationError
from braidlog import tree as merkle
from braidlog.proofs import consistency_proof, inclusion_proof, root
from braidlog.proofs.verify import VerificationError, leaf_hash, verify_consistency, verify_inclusion
from tests.support import make_delta
from tests.support.oldformat import downgrade
from tests.support.rfc9162 import Reference

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
    assert merkle.EMPTY_ROOT == hashlib.sha256(b"").digest() == Reference([]).root(0)
    assert merkle.EMPTY_ROOT.hex() == ("e3b0c44298fc1c149afbf4c8996fb924"
                                       "27ae41e4649b934ca495991b7852b855")
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


def test_a_leaf_completes_one_node_per_trailing_zero_of_its_seq():
    from braidlog.lmdb.format import completes
    f = merkle.Frontier()
    for seq in range(1, 2000):
        made = f.push(bytes(32))
        assert len(made) == completes(seq)
        assert all(((index + 1) << level) == seq for level, index, _ in made)
        assert [level for level, _, _ in made] == list(range(1, len(made) + 1))


# -- through the stores ------------------------------------------------------------------------

def _bodies(store) -> list[bytes]:
    return [row.entry for row in store.scan_rows()]


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
    body = filled.entry(17)
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


def _edit_row(path, seq, edit):
    """Replace the row of ``seq`` with ``edit(row)``, behind braidlog's back."""
    env = lmdb.open(str(path), max_dbs=16)
    with env.begin(write=True) as txn:
        db = env.open_db(b"log", txn=txn)
        key = seq.to_bytes(8, "big")
        txn.put(key, edit(bytes(txn.get(key, db=db))), db=db)
    env.close()


def _flip_node(path, level, index):
    """Flip a bit of the tree node (level, index) where the row completing it keeps it."""
    from braidlog.lmdb.format import row_node

    def edit(row):
        node = row_node(row, level)
        at = row.index(node)
        return row[:at] + bytes([node[0] ^ 1]) + row[at + 1:]
    _edit_row(path, (index + 1) << level, edit)


def test_each_row_keeps_the_nodes_its_leaf_completes(tmp_path):
    from braidlog.lmdb.format import row_node
    deltas = [make_delta(i) for i in range(40)]
    with LmdbLog(tmp_path / "s") as store:
        store.append_batch(deltas[:17])
        for d in deltas[17:]:  # one at a time: each append starts from the peaks it kept
            store.append(d)
        expected = NodeStore([merkle.leaf_hash(store.entry(s)) for s in range(1, 41)]).nodes
        env = store._db  # the same rows, read raw
        rows = store._read(lambda txn: {s: bytes(txn.get(s.to_bytes(8, "big"), db=env["log"]))
                                        for s in range(1, 41)})
    for (level, index), h in expected.items():
        assert row_node(rows[(index + 1) << level], level) == h
    assert sum(len([lv for lv in range(1, 7) if row_node(r, lv)]) for r in rows.values()) \
        == len(expected)


def test_verify_finds_a_changed_tree_node_and_repair_rewrites_it(tmp_path):
    path = tmp_path / "s"
    with LmdbLog(path) as store:
        store.append_batch([make_delta(i) for i in range(40)])
        head = store.verify()
    _flip_node(path, 3, 2)
    with LmdbLog(path) as store:
        with pytest.raises(IntegrityError, match=r"Merkle tree node \(3, 2\) over seqs 17..24"):
            store.verify()
        with pytest.raises(IntegrityError, match=r"node \(4, 1\)"):  # built on the damaged peak
            store.verify(25)
        assert store.verify(33).seq == 40  # a range past every node built on it
        assert store.repair_indexes()["tree"] == 1
        assert store.verify() == head


def test_a_row_naming_the_wrong_number_of_tree_nodes_is_refused(tmp_path):
    path = tmp_path / "s"
    with LmdbLog(path) as store:
        store.append_batch([make_delta(i) for i in range(8)])
    _edit_row(path, 6, lambda row: row[:42] + bytes([row[42] + 1]) + row[43:])
    with LmdbLog(path) as store:
        with pytest.raises(IntegrityError, match="seq 6"):
            store.verify()
        assert store.head().seq == 8


def test_a_format_1_store_gets_its_tree_when_opened_writable(tmp_path):
    path = tmp_path / "s"
    deltas = [make_delta(i) for i in range(77)]
    with LmdbLog(path) as store:
        store.append_batch(deltas)
    downgrade(path, 1)
    with pytest.raises(StorageError, match="has format version 1, which this braidlog reads only "
                       "once it is upgraded to format 5") as e:
        LmdbLog(path, readonly=True)
    assert "open it writable once" in e.value.hint
    with LmdbLog(path) as store:  # writable: upgraded in place, in one transaction
        assert store.format_version == 5
        assert [r.delta for r in store.scan()] == deltas
        ref = Reference.of_inputs(_bodies(store))
        for size in (1, 2, 3, 64, 77):
            assert root(store, size) == ref.root(size)
        assert store.verify().seq == 77
        store.append(make_delta(77))
        ref = Reference.of_inputs(_bodies(store))
        assert root(store) == ref.root(78)
    with LmdbLog(path, readonly=True) as store:
        assert store.format_version == 5 and root(store) == ref.root(78)


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


def test_completed_gives_the_nodes_push_gives_leaf_by_leaf():
    rnd = random.Random(11)
    bodies = [rnd.randbytes(rnd.randrange(0, 50)) for _ in range(700)]
    by_push, by_batch = merkle.Frontier(), merkle.Frontier()
    i = 0
    while i < len(bodies):
        n = rnd.randrange(1, 40)
        want = [b"".join(h for _, _, h in by_push.push(leaf_hash(b))) for b in bodies[i:i + n]]
        assert by_batch.completed(bodies[i:i + n]) == want
        assert by_batch.stack == by_push.stack and by_batch.size == by_push.size
        i += n


# RFC 6962's known answers, as transparency-dev/merkle publishes them (testonly/constants.go,
# reference_test.go): SHA-256 over eight fixed leaf inputs. braidlog's tree is RFC 6962 with
# SHA-256, so its own leaf and node hashes, path construction and the verifier's RFC algorithms
# must give them byte for byte, nothing swapped.
CT_LEAVES = ["", "00", "10", "2021", "3031", "40414243", "5051525354555657",
             "606162636465666768696a6b6c6d6e6f"]
CT_ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
_A, _B = "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7", \
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
_C, _D = "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e", \
    "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"
_E, _F = "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0", \
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"
CT_INCLUSION = [
    (0, 1, []), (0, 2, [_A]), (1, 2, [_B]),
    (2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (1, 5, [_B, _C, _D]),
    (0, 8, [_A, _C, "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (5, 8, [_D, _E, _F]),
]
CT_CONSISTENCY = [
    (1, 1, []), (1, 8, [_A, _C, "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (2, 5, [_C, _D]),
    (6, 8, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a", _E, _F]),
]


def test_rfc_6962_known_answers():
    from braidlog.proofs import verify as v

    leaves = [merkle.leaf_hash(bytes.fromhex(x)) for x in CT_LEAVES]
    assert leaves == [v.leaf_hash(bytes.fromhex(x)) for x in CT_LEAVES]
    frontier = merkle.Frontier()
    for n, x in enumerate(CT_LEAVES, 1):
        frontier.completed([bytes.fromhex(x)])
        assert frontier.root().hex() == CT_ROOTS[n]
    nodes = NodeStore(leaves)
    assert [nodes.root(n).hex() for n in range(9)] == CT_ROOTS
    for index, size, want in CT_INCLUSION:
        path = nodes.inclusion(index, size)
        assert [h.hex() for h in path] == want
        v.verify_inclusion(index, size, leaves[index], path, bytes.fromhex(CT_ROOTS[size]))
    for old, new, want in CT_CONSISTENCY:
        path = nodes.consistency(old, new) if old < new else []
        assert [h.hex() for h in path] == want
        v.verify_consistency(old, new, bytes.fromhex(CT_ROOTS[old]), bytes.fromhex(CT_ROOTS[new]), path)
    for size in range(1, 9):  # every proof of the eight, both ways
        for index in range(size):
            v.verify_inclusion(index, size, leaves[index], nodes.inclusion(index, size),
                               bytes.fromhex(CT_ROOTS[size]))
        for old in range(1, size):
            v.verify_consistency(old, size, bytes.fromhex(CT_ROOTS[old]), bytes.fromhex(CT_ROOTS[size]),
                                 nodes.consistency(old, size))
