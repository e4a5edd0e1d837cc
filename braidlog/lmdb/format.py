"""The store's format on disk: its tables and their keys, the format version, the check that
opens an environment as a braidlog store, the upgrades of older formats, and the Merkle tree
table kept in the append's transaction.

Tables (all in one LMDB environment): ``log`` (seq -> chain hash, ts, delta bytes), the indexes
``ids`` (id -> seq), ``idh`` (a digest of the id -> seq: the id index kept a second time, in a
tree of another shape), ``braid``, ``kind`` and ``refs`` (key -> seqs, DUPSORT), ``spaces``
(vector space -> dimension), ``tree`` (the Merkle tree's nodes by post-order position), ``notes``
(issued checkpoint notes), ``ckpt`` (projection checkpoints) and ``meta`` (format, engine,
projections used). Seqs are big-endian u64 keys, so LMDB's order is the log's.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from .. import tree as merkle
from ..chain import HASH_SIZE
from ..errors import IntegrityError, StorageError
from .env import Env

__all__ = ["FORMAT_VERSION", "TABLES", "DUPS", "id_digest", "u64", "from_u64", "open_tables",
           "Peaks", "put_tree", "build_tree"]

FORMAT_VERSION = 3  # 2: the Merkle tree ("tree") and issued checkpoint notes ("notes");
#                    3: the id-digest index ("idh"). An older store is upgraded on its first
#                    writable open, in one transaction; read-only it opens as it is.
MAX_KEY = 511  # LMDB's longest key
U64 = 8
TABLES = ("meta", "log", "ids", "braid", "kind", "refs", "ckpt", "spaces", "tree", "notes", "idh")
DUPS = {"braid", "kind", "refs"}  # DUPSORT, not DUPFIXED: LMDB 0.9's compacting copy crashes on that
SINCE = {"tree": 2, "notes": 2, "idh": 3}  # tables an older store lacks until it is upgraded


class Keys(msgspec.Struct):
    """The envelope fields an index is keyed by, decoded without the rest of the record."""

    id: str
    braid_id: str
    kind: str


decode_keys = msgspec.msgpack.Decoder(Keys).decode


def id_digest(delta_id: str) -> bytes:
    """The key of a delta id in the id-digest index: the id index kept a second time, in a tree
    of another shape, so that no single damaged page can hide an id from both."""
    return hashlib.blake2b(delta_id.encode(), digest_size=16).digest()


def u64(n: int) -> bytes:
    return n.to_bytes(U64, "big")


def from_u64(b: bytes | memoryview) -> int:
    return int.from_bytes(b, "big")


def open_tables(env: Env) -> None:
    """Check an environment is a braidlog store of a format this code reads, then open its
    tables (creating them in a new store). Runs once per environment, before any other use."""
    path = env.path
    names = env.read(lambda txn: {bytes(k) for k, _ in txn.cursor()}, buffers=False)
    if not names and env.readonly:
        raise StorageError(f"{path} is an empty store", hint="run `braidlog init` first")
    if names and b"meta" not in names:
        raise StorageError(f"{path} is an LMDB environment but not a braidlog store",
                           hint="open it with lmdb directly, or give another path")
    if names:  # an existing store: its format is checked before anything is opened or written
        meta = env.open_tables(["meta"], set(), create=False)["meta"]
        raw = env.read(lambda txn: copied(txn.get(b"format", db=meta)))
        version = int(raw) if raw is not None and raw.isdigit() else 0
        if version > FORMAT_VERSION:
            raise StorageError(
                f"{path} has format version {version}; this braidlog reads up to {FORMAT_VERSION}",
                hint="upgrade braidlog to open it")
        if version < 1:
            raise StorageError(f"{path} has no braidlog format version", hint="not a braidlog store")
        foreign = sorted(n.decode(errors="replace") for n in names - {t.encode() for t in TABLES})
        if foreign:
            raise StorageError(f"{path} is not a braidlog store: it holds {', '.join(foreign)}, "
                               "which braidlog never writes", hint="give another path")
        missing = [t for t in TABLES if t.encode() not in names and SINCE.get(t, 1) <= version]
        if missing:  # never recreated empty: an empty id index would let a retry write twice
            raise StorageError(f"{path} lacks the table(s) {', '.join(missing)}: the store is "
                               "damaged, or was not written by braidlog",
                               hint="restore it from a backup")
    else:
        version = FORMAT_VERSION
    present = [t for t in TABLES if not names or t.encode() in names]
    env.db = env.open_tables(present, DUPS, create=not names and not env.readonly)
    if not names and not env.readonly:
        def stamp(txn):
            txn.put(b"format", str(FORMAT_VERSION).encode(), db=env.db["meta"])
            txn.put(b"engine", b"braidlog", db=env.db["meta"])
        env.write(stamp)
    elif version < FORMAT_VERSION and not env.readonly:
        version = upgrade(env, version)
    env.format_version = version


def upgrade(env: Env, version: int) -> int:
    """Bring a store of an older format up to this one, in one transaction: the tables it
    lacks, built from the log."""
    added = [t for t, since in SINCE.items() if since > version]

    def fn(txn):
        tables = {t: env.env.open_db(t.encode(), txn=txn, dupsort=t in DUPS) for t in added}
        db = {**env.db, **tables}
        if "tree" in tables:
            build_tree(txn, db)
        if "idh" in tables:
            fill_idh(txn, db)
        txn.put(b"format", str(FORMAT_VERSION).encode(), db=env.db["meta"])
        return tables
    env.db.update(env.write(fn))
    return FORMAT_VERSION


def fill_idh(txn, db: dict[str, Any]) -> None:
    """The id-digest index, from the log (the truth), not from the id index."""
    rows = ((id_digest(decode_keys(value[HASH_SIZE + U64:]).id), bytes(key))
            for key, value in txn.cursor(db["log"]))
    txn.cursor(db["idh"]).putmulti(rows, overwrite=False)


def copied(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


class Peaks:
    """The hashes of the tree's peaks after an append this process made, with the log's size
    and chain hash they go with: the next append starts from them instead of reading them,
    once the log's record at that size still holds that chain hash (which covers every record
    up to it, so the same hash means the same tree; a failed write leaves a key no log has)."""

    __slots__ = ("size", "chain", "stack")

    def __init__(self) -> None:
        self.size, self.chain, self.stack = -1, b"", []


def put_tree(txn: Any, db: dict[str, Any], size: int, bodies: list[bytes],
             peaks: Peaks | None = None, chain: bytes | None = None) -> None:
    """Add the leaves of ``bodies`` after ``size`` to the Merkle tree, in the append's txn.

    Starts from the peaks of ``size`` (popcount(size) nodes, read from the table unless
    ``peaks`` holds them for this very log), appends at most log2(n) nodes a leaf (one on
    average) at the end of the table, keyed by their post-order position; ``peaks`` is left
    holding the new peaks, keyed by ``chain``, the chain hash of the last body's record."""
    tree = db["tree"]
    cur = txn.cursor(tree)
    last = from_u64(cur.key()) if cur.last() else -1
    if last != merkle.last_position(size):
        raise IntegrityError(f"the Merkle tree does not end at the log's head (seq {size}): its "
                             f"last node is {last}, expected {merkle.last_position(size)}; run "
                             "`braidlog verify`", seq=size)
    if peaks is not None and peaks.size == size and _chain_at(txn, db, size) == peaks.chain:
        hashes = peaks.stack
    else:
        hashes = []
        for level, index in merkle.peaks(size):
            value = (txn.get(u64(index + 1), db=db["log"])[HASH_SIZE:] if level == 0
                     else txn.get(u64(merkle.position((level, index))), db=tree))
            if value is None:
                raise IntegrityError(f"the Merkle tree lacks its peak ({level}, {index})", seq=size)
            hashes.append(merkle.leaf_hash(value) if level == 0 else bytes(value))
    frontier = merkle.Frontier(size, hashes)
    rows = frontier.extend(bodies)
    if rows and cur.putmulti(rows, append=True, overwrite=False)[1] != len(rows):
        raise StorageError("tree append was refused: a node already exists",
                           hint="the store is damaged; run `braidlog verify`")
    if peaks is not None and chain is not None:
        peaks.size, peaks.chain, peaks.stack = frontier.size, chain, frontier.stack


def _chain_at(txn: Any, db: dict[str, Any], seq: int) -> bytes | None:
    """The chain hash of record ``seq`` as the log holds it (None for seq 0 or a missing one)."""
    value = txn.get(u64(seq), db=db["log"]) if seq > 0 else None
    return None if value is None else bytes(value[:HASH_SIZE])


def build_tree(txn: Any, db: dict[str, Any]) -> None:
    """Build the Merkle tree of a format-1 store over all its records (the upgrade to format 2)."""
    frontier = merkle.Frontier()
    cur = txn.cursor(db["tree"])
    if cur.first():
        raise StorageError("a format-1 store already has a tree table",
                           hint="the store is damaged; restore it from a backup")
    rows: list[tuple[bytes, bytes]] = []
    for key, value in txn.cursor(db["log"]):
        if from_u64(key) != frontier.size + 1:
            raise IntegrityError(f"seq {frontier.size + 1} is missing from the log",
                                 seq=frontier.size + 1)
        rows.extend((u64(merkle.position((lv, ix))), h)
                    for lv, ix, h in frontier.push(merkle.leaf_hash(bytes(value[HASH_SIZE:]))))
        if len(rows) >= 4096:
            cur.putmulti(rows, append=True)
            rows = []
    if rows:
        cur.putmulti(rows, append=True)
