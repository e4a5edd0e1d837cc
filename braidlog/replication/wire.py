"""The wire format: what one stream message holds, and the writer-epoch record.

No I/O and no ``nats`` here: the shipper, the synchronous writer, the replica and promotion
all read and write messages through these definitions (docs/replication.md, *Design*).

A message is one log record: subject ``<prefix>.<braid token>``, payload the record's body
(``hw || canonical delta``) byte for byte, and these headers:

- ``Braidlog-Seq``: the record's seq (= the stream seq);
- ``Braidlog-Hash``: its chain hash, hex (also ``Nats-Msg-Id``);
- ``Braidlog-Commit``: the last seq of the group (one or more whole writer transactions) the
  record belongs to: the transaction marker;
- ``Braidlog-Epoch``: the writer epoch the record was written in (0 before any promotion);
- ``Braidlog-Salt``: the record's salt, hex: with the body it gives the record's committed form
  (``entry_of``), which the chain hash links.

A writer epoch starts with a ``writer_epoch`` delta in braid ``braidlog-writer``: an ordinary
record of the log (chained, stored, replicated like any other), published by ``promote`` with
the expected-last-sequence check. Every record after it carries its epoch. The kind is declared
in the log itself (a ``kind_declared`` delta, in the same transaction as the first epoch
record), so every process that opens, exports, imports or verifies the store knows it.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, NamedTuple

import msgspec

from ..chain import GENESIS, link
from ..delta import GenericDelta, _decoder, decode, delta
from ..erasure import erased_bytes
from ..errors import DecodeError, IntegrityError
from ..kind_schema import KIND_DECLARED, sync
from ..kinds import Registry
from ..store import HW_SIZE, FullStore, record_entry

__all__ = [
    "HDR_SEQ", "HDR_HASH", "HDR_COMMIT", "HDR_EPOCH", "HDR_SALT", "HDR_TREE_SIZE", "entry_of",
    "chains", "MAX_BATCH", "EPOCH_KIND", "EPOCH_BRAID",
    "Watermark", "WriterEpoch", "Row", "braid_token", "header", "epoch_deltas", "read_epoch",
    "Epochs",
]

HDR_SEQ = "Braidlog-Seq"
HDR_HASH = "Braidlog-Hash"
HDR_COMMIT = "Braidlog-Commit"
HDR_EPOCH = "Braidlog-Epoch"
HDR_SALT = "Braidlog-Salt"
HDR_TREE_SIZE = "Braidlog-Tree-Size"  # on a checkpoint note: the tree size it signs
MAX_BATCH = 1000  # the most messages JetStream takes in one atomic batch
EPOCH_KIND = "writer_epoch"
EPOCH_BRAID = "braidlog-writer"
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


class Watermark(NamedTuple):
    """How far a stream goes: its last seq, that record's chain hash, its group's last seq, and
    the writer epoch it was written in.

    ``commit > seq`` means the stream ends inside a group: the shipper was stopped between two
    atomic batches of one group and finishes it when it resumes.
    """

    seq: int
    hash: bytes
    commit: int
    epoch: int = 0

    @property
    def complete(self) -> bool:
        return self.commit == self.seq

    def __str__(self) -> str:
        return f"{self.seq}:{self.hash.hex()}"


EMPTY = Watermark(0, GENESIS, 0, 0)


class Row(NamedTuple):
    """One record as it is published."""

    seq: int
    hash: bytes
    body: bytes
    subject: str
    epoch: int
    salt: bytes = b""


def entry_of(seq: int, body: bytes, salt: bytes | None) -> bytes:
    """The committed form of a shipped record (seq, body, salt); b"" when the body is not a
    delta or the salt is missing (such a record chains onto nothing)."""
    if len(body) <= 8:
        return b""
    try:
        d = _decoder.decode(body[HW_SIZE:])
    except (msgspec.MsgspecError, ValueError):
        return b""
    if (d.erased is None) != bool(salt):  # an erased record ships no salt, any other one
        return b""
    return record_entry(seq, d, salt or b"", body[HW_SIZE:])


def chains(prev: bytes, seq: int, body: bytes, salt: bytes | None) -> bytes:
    """The chain hash a shipped record gives after ``prev``."""
    return link(prev, seq, entry_of(seq, body, salt))


# NOTE: the class name is not stored (the payload is a plain map); field names are: never
# rename one.
class WriterEpoch(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A new writer epoch: from this record on, only its writer's records are in the stream."""

    epoch: Annotated[int, msgspec.Meta(ge=1)]
    writer: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    forced: bool = False


#: WriterEpoch as the JSON Schema the kind is declared with in the log.
EPOCH_SCHEMA = {
    "type": "object",
    "properties": {"epoch": {"type": "integer", "minimum": 1},
                   "writer": {"type": "string", "minLength": 1, "maxLength": 200},
                   "forced": {"type": "boolean"}},
    "required": ["epoch", "writer"],
    "additionalProperties": False,
}


def epoch_deltas(registry: Registry, epoch: int, writer: str, *, forced: bool, ts: datetime
                 ) -> list[GenericDelta]:
    """The records that start writer epoch ``epoch``: the epoch record, preceded by the kind's
    declaration when the store's log does not declare it yet."""
    sync(registry)
    out = []
    if registry.get(EPOCH_KIND) is None:
        out.append(delta("kinds", KIND_DECLARED, {
            "name": EPOCH_KIND, "schema": EPOCH_SCHEMA, "version": 1, "owner": "replication",
            "description": "a new writer epoch of a replicated log (docs/replication.md)"},
            provenance="system", ts=ts))
    out.append(delta(EPOCH_BRAID, EPOCH_KIND,
                     msgspec.to_builtins(WriterEpoch(epoch, writer, forced)),
                     provenance="system", ts=ts))
    return out


def read_epoch(d: GenericDelta) -> WriterEpoch:
    """The payload of an epoch record (DecodeError if it is not one)."""
    try:
        return msgspec.convert(d.payload, WriterEpoch)
    except msgspec.ValidationError as e:
        raise DecodeError(f"a {EPOCH_KIND} record with a bad payload: {e}") from None


class _Head(msgspec.Struct):
    braid_id: str
    kind: str


_head_decoder = msgspec.msgpack.Decoder(_Head)


def braid_and_kind(body: bytes) -> tuple[str, str]:
    """The braid id and kind of a stored body, without decoding the rest."""
    h = _head_decoder.decode(body[HW_SIZE:])
    return h.braid_id, h.kind


def braid_token(braid_id: str) -> str:
    """A braid id as one subject token: ``[A-Za-z0-9_-]`` kept, any other byte as ``~XX``."""
    return "".join(chr(b) if b in _SAFE else f"~{b:02X}" for b in braid_id.encode())


def header(headers: Mapping[str, str] | None, name: str) -> str | None:
    """A header by name, case-insensitively."""
    if not headers:
        return None
    value = headers.get(name)
    if value is None:
        low = name.lower()
        for key, v in headers.items():
            if str(key).lower() == low:
                return v
    return value


def epoch_header(headers: Mapping[str, str] | None) -> int:
    """The ``Braidlog-Epoch`` of a message (0 when absent: shipped before any promotion)."""
    value = header(headers, HDR_EPOCH)
    if value is None:
        return 0
    try:
        epoch = int(value)
    except ValueError:
        epoch = -1
    if epoch < 0:
        raise ValueError(f"{HDR_EPOCH} {value!r} is not a whole number")
    return epoch


class Epochs:
    """The writer epochs of a store's log: which epoch each seq was written in."""

    def __init__(self, store: FullStore) -> None:
        self.starts: list[int] = [0]   # seq of each epoch record (0 for epoch 0)
        self.epochs: list[int] = [0]
        self.writers: list[str] = [""]
        self._store = store
        self._scanned = 0
        self.refresh()

    def refresh(self) -> None:
        """Take in the epoch records committed since the last look."""
        head = self._store.head().seq
        if head <= self._scanned:
            return
        for rec in self._store.scan_kind(EPOCH_KIND, self._scanned + 1, head + 1):
            if rec.delta.braid_id != EPOCH_BRAID:
                continue
            payload = read_epoch(rec.delta)
            self.starts.append(rec.seq)
            self.epochs.append(payload.epoch)
            self.writers.append(payload.writer)
        self._scanned = head

    def at(self, seq: int) -> int:
        """The epoch record ``seq`` was written in."""
        return self.epochs[bisect.bisect_right(self.starts, seq) - 1]

    @property
    def current(self) -> int:
        return self.epochs[-1]


def rows(store: FullStore, epochs: Epochs, subject: Any, start: int, stop: int) -> list[Row]:
    """The records ``start..stop`` (inclusive) as rows to publish, gap-free."""
    out: list[Row] = []
    epoch = epochs.at(start - 1)
    for row in store.scan_rows(start, stop + 1):
        seq, chain, body = row.seq, row.hash, row.body
        if row.erased_by:  # erased before it was shipped: it ships erased
            body = body + erased_bytes(row.entry, row.erased_by)
        if seq != start + len(out):
            break
        braid_id, kind = braid_and_kind(body)
        if kind == EPOCH_KIND and braid_id == EPOCH_BRAID:
            epoch = read_epoch(decode(body[HW_SIZE:])).epoch
        out.append(Row(seq, chain, body, subject(braid_id), epoch, row.salt))
    if len(out) != stop - start + 1:
        raise IntegrityError(f"seq {start + len(out)} is missing from the log",
                             seq=start + len(out))
    return out
