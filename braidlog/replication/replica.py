"""Replicas: rebuild a store from its stream, checking every record against its own head.

A replica checks every message before anything is written (docs/replication.md, *What a
replica checks*): seq, transaction marker, chain hash, the delta itself, the time watermark,
the writer epoch. It applies a group (one or more whole writer transactions) in one
transaction of its own, only once it holds all of it, so it never exposes half a transaction.
The first record that fails a check stops the replica for good with an IntegrityError naming
its seq.

Given ``checkpoints`` (a function that opens a signed checkpoint note, checking its signature),
a replica also reads the writer's signed checkpoints from the stream beside the records
(``Stream.checkpoint_stream``) and refuses a record at which the Merkle root of the records
applied so far differs from a checkpoint's: a forgery that recomputed the chain hashes is caught
there. A checkpoint that arrives after the records it covers were applied is checked against
the replica's own tree, and a contradiction stops the replica the same way.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, NamedTuple

from .. import tree as merkle
from ..delta import GenericDelta, decode, validate_typed
from ..erasure import ERASED, reproduced
from ..errors import BraidlogError, ConflictError, DecodeError, IntegrityError, ReplicationError, ValidationError
from ..kind_schema import KIND_DECLARED, admit_declaration
from ..kind_schema import sync as sync_kinds
from ..store import HW_SIZE, FullStore, Head, chain_fault, hw_fault, hw_of, ts_micros
from ..store.files import write_atomic
from .role import mark_replica
from .stream import Stream
from .wire import (
    EPOCH_BRAID,
    EPOCH_KIND,
    HDR_COMMIT,
    HDR_EPOCH,
    HDR_HASH,
    HDR_SALT,
    HDR_SEQ,
    MAX_BATCH,
    Epochs,
    entry_of,
    epoch_header,
    header,
    read_epoch,
)

__all__ = ["Replica"]


class _Pending(NamedTuple):
    seq: int
    hash: bytes
    hw: int
    delta: GenericDelta
    epoch: int
    body: bytes
    salt: bytes
    entry: bytes


class Replica:
    """Rebuilds a store from a stream; every record is checked against its own head first.

    The replica's store must hold a prefix of the stream (empty is fine). Records are applied
    one complete group per transaction through the store's own append, so the replica's log
    is byte-identical to the writer's. A record that does not chain (or is not a valid delta)
    is refused with an IntegrityError naming its seq; nothing after it is applied and the
    replica stays stopped (``.error``).
    """

    def __init__(self, store: FullStore, stream: Stream, *, batch: int = MAX_BATCH,
                 checkpoints: Callable[[bytes], Any] | None = None,
                 witness_key: Any = None, cosign_dir: str | None = None,
                 _for_writer: bool = False) -> None:
        if not 1 <= batch <= MAX_BATCH:
            raise ValidationError("batch", f"must be 1 to {MAX_BATCH}, got {batch}")
        if (witness_key is None) != (cosign_dir is None):
            raise ValidationError("cosign_dir", "a witness replica needs both witness_key and "
                                  "cosign_dir (where its cosignatures go)")
        if witness_key is not None and checkpoints is None:
            raise ValidationError("witness_key", "a replica cosigns only checkpoints it verified: "
                                  "give checkpoints= (the log's key) too")
        self.store = store
        self.stream = stream
        if not _for_writer:  # its log is its stream's now: no local writes until promoted
            mark_replica(store, stream.name)
        self.epochs = Epochs(store)
        self.batch = batch
        self.applied = 0
        self.error: IntegrityError | None = None
        self._head = store.head()
        self._hw = hw_of(store.body(self._head.seq)) if self._head.seq else 0
        self._pending: list[_Pending] = []
        self._group_end = 0
        self._ids: set[str] = set()
        self._kinds: Any = None  # the kinds a group is checked against (its declarations too)
        self._anchored = False
        # signed checkpoints: ``checkpoints(note)`` opens a note (checks its signature) and
        # returns an object with ``size`` and ``root``, e.g.
        # ``lambda note: braidlog.proofs.verify.open_checkpoint(note, key)``
        self.checkpoints = checkpoints
        self.ignored_checkpoints = 0
        self.checked_checkpoints = 0  # verified checkpoints the applied records were held to
        self._roots: dict[int, bytes] = {}
        self._notes: dict[int, bytes] = {}  # verified notes not yet cosigned (witness only)
        self.witness = None if witness_key is None or cosign_dir is None else _Witness(witness_key, cosign_dir)
        self._note_seq = 1
        self._frontier = (merkle.Frontier(self._head.seq, store.tree_hashes(
            merkle.peaks(self._head.seq))) if checkpoints is not None else None)

    @property
    def head(self) -> Head:
        """The last record applied (a group end)."""
        return self._head

    def catch_up(self, *, timeout: float = 60.0) -> Head:
        """Apply every complete group the stream holds now; the replica's head."""
        deadline = time.monotonic() + timeout
        self._alive()
        target = self.stream.info(timeout=timeout)["last_seq"]
        self._anchor(target, deadline)
        while self._next() <= target:
            if time.monotonic() >= deadline:
                raise ReplicationError(
                    f"replica of stream {self.stream.name} reached seq {self._head.seq} of "
                    f"{target} within {timeout:.1f} s", hint="give it more time")
            if not self._pull(deadline):
                time.sleep(0.02)  # a lagging replica of the stream answered; ask again
        self._drop_pending()  # the stream ends inside a group: wait for the rest of it
        self._load_checkpoints(deadline)
        return self._head

    def follow(self, stop: threading.Event | None = None, *, timeout: float | None = None,
               poll: float = 0.05) -> Head:
        """Apply groups as they arrive until ``stop`` is set or ``timeout`` passes.

        Reads again at once after a full batch, else after ``poll`` seconds.
        """
        end = None if timeout is None else time.monotonic() + timeout
        stop = stop or threading.Event()
        self._alive()
        self._anchor(None, time.monotonic() + self.stream.timeout)
        while not stop.is_set() and (end is None or time.monotonic() < end):
            if self._pull(time.monotonic() + 60.0) < self.batch:
                stop.wait(poll)
        self._drop_pending()
        return self._head

    # -- reading ---------------------------------------------------------------------------
    def _alive(self) -> None:
        if self.error is not None:
            raise self.error

    def _next(self) -> int:
        return self._head.seq + len(self._pending) + 1

    def _drop_pending(self) -> None:
        self._pending.clear()
        self._ids.clear()
        self._kinds = None

    def _anchor(self, last: int | None, deadline: float) -> None:
        """Check once that the replica's own head is a record of the stream."""
        if self._anchored:
            return
        seq = self._head.seq
        if seq:
            if last is None:
                last = self.stream.info(timeout=max(deadline - time.monotonic(), 0.1))["last_seq"]
            if seq > last:
                raise ConflictError(
                    f"this store's head is seq {seq} but stream {self.stream.name} ends at seq "
                    f"{last}: the store is not a replica of that stream", expected=last,
                    actual=seq)
            rows = self.stream._retry(lambda: self.stream._read(seq, 1), deadline,
                                      "reading the replica's anchor")
            found = rows[0][1] if rows and rows[0][0] == seq else None
            if header(found, HDR_HASH) != self._head.hash.hex():
                self._refuse(seq, "the replica's own record at this seq differs from the "
                             "stream's: the store is not a replica of this stream")
        self._anchored = True

    def _pull(self, deadline: float) -> int:
        self._load_checkpoints(deadline)
        start = self._next()
        rows = self.stream._retry(lambda: self.stream._read(start, self.batch), deadline,
                                  "reading records")
        for seq, headers, body in rows:
            if seq < self._next():
                continue  # a late duplicate of a message already taken
            self._accept(seq, headers, body)
        return len(rows)

    def _refuse(self, seq: int, why: str, *, expected: bytes | None = None,
                found: bytes | None = None) -> None:
        self._drop_pending()
        self.error = IntegrityError(
            f"stream {self.stream.name}: record seq {seq} refused: {why}; the replica stopped "
            f"at seq {self._head.seq} and applied nothing after it", seq=seq, expected=expected,
            found=found)
        raise self.error

    def _accept(self, seq: int, headers: Mapping[str, str] | None, body: bytes) -> None:
        want = self._next()
        if seq != want:
            self._refuse(want, f"the stream has no message at seq {want} (next found: {seq})")
        try:
            shipped_seq = int(header(headers, HDR_SEQ) or "")
            shipped = bytes.fromhex(header(headers, HDR_HASH) or "")
            commit = int(header(headers, HDR_COMMIT) or "")
            epoch = epoch_header(headers)
            salt = bytes.fromhex(header(headers, HDR_SALT) or "")
        except ValueError:
            self._refuse(seq, f"the message has no valid {HDR_SEQ}/{HDR_HASH}/{HDR_COMMIT}/"
                         f"{HDR_EPOCH}/{HDR_SALT} headers")
        if shipped_seq != seq:
            self._refuse(seq, f"stream seq {seq} carries log seq {shipped_seq}")
        group = self._pending[0].seq if self._pending else seq
        if commit < seq or (self._pending and commit != self._group_end):
            self._refuse(seq, f"its transaction marker {commit} does not close the group "
                         f"that starts at seq {group}")
        prev = self._pending[-1].hash if self._pending else self._head.hash
        entry = entry_of(seq, body, salt)
        chained = chain_fault(prev, seq, entry, shipped)
        if chained is not None:
            self._refuse(seq, f"it does not chain: the head before it and its bytes give hash "
                         f"{chained.hex()}, the stream says {shipped.hex()}",
                         expected=chained, found=shipped)
        try:
            if self._kinds is None:  # a group starts: the store's kinds, as its log declares
                sync_kinds(self.store.registry)
                self._kinds = self.store.registry
            stored = decode(body[HW_SIZE:])
            if stored.erased is not None:  # an erased record: its envelope and commitment
                reproduced(stored, 0)
                data, typed = body[HW_SIZE:], None
            else:
                stored, data, typed = validate_typed(stored, self._kinds)
            if stored.kind == KIND_DECLARED:  # the group may use the kind it declares
                self._kinds = admit_declaration(self._kinds, self.store.registry, typed,
                                                len(self._pending))
        except (DecodeError, ValidationError) as e:
            self._refuse(seq, f"it is not a delta this replica can store ({e}); a replica needs "
                         "the writer's kinds declared (import the same projections)")
        if data != body[HW_SIZE:]:
            self._refuse(seq, "its delta bytes are not canonical here: the replica's kind "
                         "registry differs from the writer's (import the same projections)")
        prev_hw = self._pending[-1].hw if self._pending else self._hw
        hw = hw_fault(prev_hw, body, ts_micros(stored.ts))
        if hw is not None:
            self._refuse(seq, f"its time watermark {hw_of(body)} should be {hw}")
        hw = hw_of(body)
        if stored.id in self._ids or self.store.seq_of(stored.id) is not None:
            self._refuse(seq, f"delta id {stored.id} is already in the log")
        current = self._pending[-1].epoch if self._pending else self.epochs.current
        if stored.kind == EPOCH_KIND and stored.braid_id == EPOCH_BRAID:
            new = read_epoch(stored).epoch  # validate() checked the payload's schema
            if new != current + 1 or epoch != new:
                self._refuse(seq, f"it starts writer epoch {new} (header {HDR_EPOCH} {epoch}) "
                             f"but the log is in epoch {current}: epochs go up by one")
            current = new
        elif epoch != current:
            self._refuse(seq, f"it was written in writer epoch {epoch} but the log is in epoch "
                         f"{current}: a fenced writer's record")
        self._ids.add(stored.id)
        self._pending.append(_Pending(seq, shipped, hw, stored, current, body, salt, entry))
        self._group_end = commit
        if seq == commit:
            self._apply()

    def _load_checkpoints(self, deadline: float) -> None:
        """Read the signed checkpoints published since the last look; check the ones that
        cover records already applied."""
        if self.checkpoints is None:
            return
        stream = self.stream
        while True:
            start = self._note_seq
            got = stream._retry(partial(stream._read_notes, start, MAX_BATCH), deadline,
                                "reading checkpoints")
            for seq, _headers, note in got:
                self._note_seq = seq + 1
                try:
                    cp = self.checkpoints(note)
                    size, root = int(cp.size), bytes(cp.root)
                except (ValueError, BraidlogError):
                    self.ignored_checkpoints += 1  # not signed by the key we trust: not evidence
                    continue
                known = self._roots.get(size)
                if known is not None and known != root:
                    raise IntegrityError(
                        f"stream {stream.name}: two checkpoints signed by the trusted key give "
                        f"tree size {size} the roots {known.hex()} and {root.hex()}: the writer "
                        "signed two different logs", seq=size, expected=known, found=root)
                self._roots[size] = root
                if self.witness is not None:
                    self._notes[size] = bytes(note)
                if size <= self._head.seq:
                    found = merkle.resolve([(0, size)], self.store.tree_hashes)[0] if size \
                        else merkle.EMPTY_ROOT
                    if found != root:
                        self.error = IntegrityError(
                            f"stream {stream.name}: a signed checkpoint says the first {size} "
                            f"records have root {root.hex()}, but the {size} this replica "
                            f"applied give {found.hex()}: the stream held forged or rewritten "
                            "records when they were applied; rebuild this replica from a "
                            "stream you trust", seq=size, expected=root, found=found)
                        raise self.error
                    self.checked_checkpoints += 1
            if len(got) < MAX_BATCH:
                self._cosign()
                return

    def _cosign(self) -> None:
        """Cosign each verified checkpoint the applied (durable) records reach."""
        if self.witness is None:
            return
        for size in sorted(s for s in self._notes if s <= self._head.seq):
            self.witness.cosign(self.store, self._notes.pop(size))

    def _apply(self) -> None:
        group, first = self._pending, self._pending[0].seq
        frontier = self._frontier
        if frontier is not None:
            frontier = merkle.Frontier(frontier.size, frontier.stack)  # a copy
            for p in group:
                frontier.push(merkle.leaf_hash(p.entry))
                want = self._roots.get(frontier.size)
                if want is not None:
                    self.checked_checkpoints += 1
                if want is not None and frontier.root() != want:
                    self._refuse(p.seq, f"a signed checkpoint says the first {frontier.size} "
                                 f"records have root {want.hex()}, the stream's give "
                                 f"{frontier.root().hex()}: the stream's records up to here are "
                                 "forged or rewritten", expected=want, found=frontier.root())
        # An erased delta naming records this replica holds as they were: they are erased
        # with the group, in one step (the replica's store must be open here alone).
        erase = {s: p.seq for p in group if p.delta.kind == ERASED
                 for s in p.delta.payload.get("seqs", ()) if s <= self._head.seq}
        erase = {s: by for s, by in erase.items() if self.store.read(s).delta.erased is None}

        def commit(store: Any) -> list[Any]:
            return store.commit([p.delta for p in group], expected_head=self._head.seq,
                                salts={p.delta.id: p.salt for p in group if p.salt})
        try:
            records = self.store.apply_erasures(erase, commit)[0] if erase else commit(self.store)
        except ConflictError as e:
            self._refuse(first, f"the replica's store moved under it ({e}); only the replica "
                         "may write to it")
        except ValidationError as e:
            self._refuse(first, f"the store refused the group ({e})")
        if [(r.seq, r.hash) for r in records] != [(p.seq, p.hash) for p in group]:
            raise IntegrityError(
                f"the replica's store wrote seqs {first}..{group[-1].seq} with other hashes than "
                "the stream's; run `braidlog verify` and rebuild the replica", seq=first)
        self._head = Head(group[-1].seq, group[-1].hash)
        self._frontier = frontier
        self.epochs.refresh()
        self._hw = group[-1].hw
        self.applied += len(group)
        self._drop_pending()
        self._cosign()


class _Witness:
    """A replica's cosigning: each cosigned note goes to ``<dir>/<size>.cosig``; ``<dir>/last``
    is the last checkpoint cosigned, which every later one must be consistent with."""

    def __init__(self, key: Any, directory: str) -> None:
        from ..proofs import cosign
        os.makedirs(directory, exist_ok=True)
        self.key, self.dir, self._c = key, directory, cosign
        self.cosigned = 0
        self.last = None
        try:
            with open(os.path.join(directory, "last"), "rb") as f:
                body, _ = cosign.note_parts(f.read())
            self.last = cosign.v.parse_checkpoint_text(body)
        except FileNotFoundError:
            pass
        except (ValueError, BraidlogError) as e:
            raise IntegrityError(f"the last checkpoint cosigned, {directory}/last, is damaged: "
                                 f"{e}") from None

    def cosign(self, store: FullStore, note: bytes) -> None:
        from ..proofs.prove import consistency_proof

        c = self._c
        body, _ = c.note_parts(note)
        cp = c.v.parse_checkpoint_text(body)
        last = self.last
        if last is not None and cp.size <= last.size:
            if cp.size == last.size and cp.root != last.root:
                raise IntegrityError(f"two checkpoints of size {cp.size} with different roots: "
                                     "the log forked; not cosigned", seq=cp.size)
            return  # cosigned already, or older than the last one cosigned
        proof = consistency_proof(store, last.size, cp.size).path if last else ()
        line = c.cosign_checked(body, cp, self.key, last=last, proof=proof)
        cosigned = c.add_signatures(note, [line.rstrip("\n")]).encode()
        for name in (f"{cp.size}.cosig", "last"):
            write_atomic(os.path.join(self.dir, name), cosigned)
        self.last = cp
        self.cosigned += 1




