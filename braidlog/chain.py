"""The hash chain, a record as stored, and the checks that a run of records continues the log.
Pure: no I/O (rows come in as iterators, the tree's stored nodes through a callable).

``h[seq] = blake3(h[seq-1] || seq as 8 bytes big-endian || entry)``, with ``h[0]`` 32 zero bytes,
where ``entry`` is record ``seq``'s committed form (delta.committed_form). Changing, dropping or
reordering any record changes every later hash, so the head (seq, hash) written down at any time
proves the whole prefix up to it.

A record (``Row``) is its seq, chain hash, ``hw`` (the highest ``ts`` of deltas 1..seq,
microseconds since the epoch), committed form, salt and canonical delta bytes (``data``). The
Merkle tree's leaf ``seq - 1`` is the committed form too, and the committed form holds
``SHA-256(salt || data)``: so ``data`` and ``salt`` can be dropped (an erased record keeps its
committed form alone) without changing a chain hash, a tree node or a proof.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

import msgspec
from blake3 import blake3

from . import tree as merkle
from .delta import Entry, GenericDelta, _decoder, decode_entry, form_of, ts_micros
from .errors import IntegrityError

__all__ = ["GENESIS", "HASH_SIZE", "link", "links", "first_mismatch", "digest", "Row",
           "ts_micros", "check_row", "check_row_parts", "checked_rows", "tree_checked", "tree_break"]

HASH_SIZE = 32
GENESIS = bytes(HASH_SIZE)


def link(prev: bytes, seq: int, data: bytes) -> bytes:
    """The chain hash of record ``seq`` with stored bytes ``data`` after hash ``prev``."""
    return blake3(prev + seq.to_bytes(8, "big") + data).digest()


def links(prev: bytes, seq: int, bodies: Iterable[bytes]) -> list[bytes]:
    """The chain hashes of ``bodies`` stored at ``seq``, ``seq + 1`` … after hash ``prev``:
    ``link`` over a batch, with one hasher reset after each record (a third cheaper than a new
    hasher per record on the append path)."""
    hasher = blake3()
    update, digest_, reset = hasher.update, hasher.digest, hasher.reset
    out: list[bytes] = []
    for data in bodies:
        update(prev + seq.to_bytes(8, "big") + data)
        prev = digest_()
        reset()
        out.append(prev)
        seq += 1
    return out


def digest(data: bytes) -> bytes:
    """A plain blake3 digest (for checkpoints and derived artifacts)."""
    return blake3(data).digest()


def first_mismatch(prev: bytes, records: Iterable[tuple[int, bytes, bytes]]
                   ) -> tuple[int, bytes, bytes] | None:
    """Walk (seq, stored hash, stored bytes) in order from ``prev``; the first that does not chain.

    Returns (seq, expected hash, found hash), or None when every record chains.
    """
    for seq, found, data in records:
        expected = blake3(prev + seq.to_bytes(8, "big") + data).digest()
        if expected != found:
            return seq, expected, found
        prev = found
    return None


class Row(NamedTuple):
    """A record as stored: seq, chain hash, hw, committed form, salt and canonical delta bytes
    (``salt`` and ``data`` are empty once the record's payload was erased; ``erased_by`` is then
    the seq of the ``erased`` delta that erased it, else 0)."""

    seq: int
    hash: bytes
    hw: int
    entry: bytes
    salt: bytes
    data: bytes
    erased_by: int = 0

    @property
    def body(self) -> bytes:
        return self.hw.to_bytes(8, "big") + self.data


def check_row(row: Row, prev_hw: int) -> None:
    """IntegrityError unless ``row`` holds together: its salt and delta bytes give its committed
    form's commitment, the delta's envelope is the committed form's (byte for byte), and its hw
    follows ``prev_hw``. A row whose delta bytes were erased has its committed form alone. A
    committed form that does not decode is left to the chain, which covers it."""
    check_row_parts(row, prev_hw)


def check_row_parts(row: Row, prev_hw: int) -> tuple[Entry | None, GenericDelta | None]:
    """``check_row``, returning what it decoded on the way: the committed form (None when it
    does not decode) and the delta (None once erased), so a caller that needs them (verify's
    index check) decodes each record once."""
    seq = row.seq
    try:
        e = decode_entry(row.entry)
    except ValueError:
        return None, None
    d = None
    if row.data:
        made = hashlib.sha256(row.salt + row.data).digest()
        if made != e.commitment:
            raise IntegrityError(
                f"record seq {seq}: its delta bytes and salt do not give the commitment in its "
                f"committed form (expected {e.commitment.hex()}, they give {made.hex()}): the "
                "record was changed after it was written", seq=seq, expected=e.commitment,
                found=made)
        try:
            d = _decoder.decode(row.data)
        except msgspec.MsgspecError as x:
            raise IntegrityError(f"record seq {seq} is not a delta ({x}), yet its commitment "
                                 "matches", seq=seq) from None
        entry = form_of(seq, d, made)  # committed_form, with the commitment just checked
        if entry != row.entry:
            raise IntegrityError(
                f"record seq {seq}: its delta's envelope is not the one in its committed form: "
                "the record was changed after it was written", seq=seq,
                expected=entry, found=row.entry)
        ts = ts_micros(d.ts)
    else:
        if e.seq != seq or row.salt:
            raise IntegrityError(f"record seq {seq}: its committed form names seq {e.seq}; the "
                                 "record was changed after it was written", seq=seq,
                                 expected=seq.to_bytes(8, "big"), found=e.seq.to_bytes(8, "big"))
        ts = e.ts
    want = max(prev_hw, ts)
    if row.hw != want:
        raise IntegrityError(f"record seq {seq}: its high-water time {row.hw} should be {want} "
                             "(the latest ts up to it); it was changed after it was written",
                             seq=seq, expected=want.to_bytes(8, "big"),
                             found=row.hw.to_bytes(8, "big"))
    return e, d


def checked_rows(rows: Iterator[Row], start: int, prev: bytes, prev_hw: int,
                 progress: Callable[[int], None] | None = None) -> Iterator[Row]:
    """``rows`` from seq ``start`` passed through once each chains from the one before (``prev``
    the chain hash at ``start - 1``, ``prev_hw`` its hw) and holds together (``check_row``);
    the first that does not raises IntegrityError naming its seq."""
    expect, done = start, 0
    for row in rows:
        seq = row.seq
        if seq != expect:
            raise IntegrityError(f"seq {expect} is missing from the log (next found: {seq})",
                                 seq=expect)
        expected = link(prev, seq, row.entry)
        if expected != row.hash:
            raise IntegrityError(
                f"chain broken at seq {seq}: expected hash {expected.hex()}, found "
                f"{row.hash.hex()}; the record or its hash was changed after it was written",
                seq=seq, expected=expected, found=row.hash)
        check_row(row, prev_hw)
        prev, prev_hw = row.hash, row.hw
        expect += 1
        done += 1
        if progress is not None and done % 65536 == 0:
            progress(done)
        yield row


def tree_checked(tree_hashes: Callable[[list[merkle.Node]], list[bytes]], start: int,
                 rows: Iterator[Row]) -> Iterator[Row]:
    """Pass ``rows`` through while recomputing the Merkle tree nodes their leaves complete and
    comparing them, a chunk at a time, with the stored ones (``tree_hashes``), after the chain
    has passed those rows: a changed record is reported as a chain break, a changed tree node
    as a tree break."""
    size = start - 1
    frontier = merkle.Frontier(size, tree_hashes(merkle.peaks(size)))
    made: list[tuple[int, int, bytes]] = []
    for row in rows:
        made.extend(frontier.push(merkle.leaf_hash(row.entry)))
        yield row
        if len(made) >= 4096:
            _compare_nodes(tree_hashes, made)
            made = []
    _compare_nodes(tree_hashes, made)


def _compare_nodes(tree_hashes: Callable[[list[merkle.Node]], list[bytes]],
                   made: list[tuple[int, int, bytes]]) -> None:
    stored = tree_hashes([(level, index) for level, index, _ in made]) if made else []
    for (level, index, expected), found in zip(made, stored, strict=False):
        if expected != found:
            raise tree_break(level, index, expected, found)


def tree_break(level: int, index: int, expected: bytes, found: bytes) -> IntegrityError:
    """The error for a stored Merkle tree node ``(level, index)`` that is not the one its
    records make (``expected``); its seq is the last record under the node."""
    first, last = (index << level) + 1, (index + 1) << level
    return IntegrityError(
        f"Merkle tree node ({level}, {index}) over seqs {first}..{last} does not match the "
        f"records: expected {expected.hex()}, found {found.hex()}; the stored node was "
        "changed after it was written (`braidlog repair --indexes` rewrites the tree's "
        "nodes from the records)",
        seq=last, expected=expected, found=found)
