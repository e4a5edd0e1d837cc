"""``MemoryLog``, the reference store: the specification in executable form, plain lists and
dicts, no cleverness. ``LmdbLog`` must behave exactly like it; the contract suites in
tests/store/ run against both.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from .. import tree as merkle
from ..chain import GENESIS, Row, digest
from ..delta import GenericDelta, encode
from ..erasure import erased_delta, payload_refs
from ..errors import NoSuchSeq, ValidationError
from ..kind_schema import store_kinds
from ..kinds import REGISTRY, Registry
from .arguments import checked_reads
from .ports import Admit, BraidHead, FullStore, Head, Progress, Record
from .rules import HW_SIZE, Checked, IndexScans, check_batch, hw_of, id_key, stage, ts_micros, verify_bodies

__all__ = ["MemoryLog"]


@checked_reads
class MemoryLog(IndexScans, FullStore):
    """The reference store: everything in lists and dicts, lost when the process ends."""

    readonly = False

    def __init__(self, registry: Registry = REGISTRY) -> None:
        self.registry = store_kinds(registry, self)
        self._records: list[tuple[bytes, bytes, GenericDelta]] = []  # (hash, body, delta)
        self._sealed: list[tuple[bytes, bytes]] = []  # (committed form, salt)
        self._hw: list[int] = []
        self._ids: dict[str, int] = {}
        self._by: dict[tuple[str, str], list[int]] = {}  # (index, key) -> seqs
        self._braids: dict[str, BraidHead] = {}
        self._dims: dict[str, int] = {}
        self._checkpoints: dict[tuple[str, int, int], bytes] = {}
        self._used: list[str] = []  # the projections the store is used with
        self._tree: dict[merkle.Node, bytes] = {}  # every complete subtree of level >= 1
        self._frontier = merkle.Frontier()
        self._notes: dict[tuple[int, bytes], bytes] = {}
        self._erased: dict[int, int] = {}  # erased seq -> the seq of its erasure
        self._lock = threading.RLock()  # the single writer

    # -- writing -----------------------------------------------------------------------------
    def append(self, delta: GenericDelta, *, expected_version: int | None = None) -> int:
        """Append one delta; return its seq."""
        return self.append_batch([delta], expected_version=expected_version)[0]

    def append_batch(self, deltas: Iterable[GenericDelta], *,
                     expected_version: int | Mapping[str, int] | None = None,
                     expected_head: int | None = None, admit: Admit | None = None,
                     salts: Mapping[str, bytes] | None = None) -> list[int]:
        """Append deltas atomically; return their seqs in order."""
        return self._append(deltas, expected_version, expected_head, admit, salts)[1]

    def commit(self, deltas: Iterable[GenericDelta], *,
               expected_version: int | Mapping[str, int] | None = None,
               expected_head: int | None = None, admit: Admit | None = None,
               salts: Mapping[str, bytes] | None = None) -> list[Record]:
        """Append deltas atomically; return the records written (none for a pure retry)."""
        return [Record(s.seq, s.hash, s.delta)
                for s in self._append(deltas, expected_version, expected_head, admit, salts)[0]]

    def commit_locked(self, prepare: Callable[[Head], Iterable[GenericDelta]], *,
                      expected_version: int | Mapping[str, int] | None = None,
                      admit: Admit | None = None) -> list[Record]:
        """Call ``prepare(head)`` holding the writer lock and append its deltas atomically."""
        with self._lock:
            head = self.head()
            return self.commit(list(prepare(head)), expected_version=expected_version,
                               expected_head=head.seq, admit=admit)

    def _append(self, deltas: Iterable[Any], expected_version: Any, expected_head: int | None,
                admit: Any = None, salts: Any = None) -> Any:
        checked = check_batch(deltas, self.registry, erasure=salts is not None)
        with self._lock:
            return self._place(checked, expected_version, expected_head, admit, salts)

    def _place(self, checked: Any, expected_version: Any, expected_head: int | None,
               admit: Any = None, salts: Any = None) -> Any:
        head = self.head()
        staged, seqs = stage(
            checked, head=head, hw=self._hw[-1] if self._hw else 0,
            lookup=self._lookup, braid_version=lambda b: self.braid_head(b).version,
            expected_version=expected_version, expected_head=expected_head, dims=self._dims.get,
            salts=salts)
        if admit is not None and staged:
            admit(head, staged)
        for s in staged:
            d = s.delta
            self._records.append((s.hash, s.body + encode(d) if s.erased_by else s.body, d))
            self._sealed.append((s.entry, s.salt))
            if s.erased_by:
                self._erased[s.seq] = s.erased_by
            self._hw.append(hw_of(s.body))
            self._ids[d.id] = s.seq
            self._by.setdefault(("braid", d.braid_id), []).append(s.seq)
            self._by.setdefault(("kind", d.kind), []).append(s.seq)
            for ref in s.refs:
                self._by.setdefault(("refs", ref), []).append(s.seq)
            self._braids[d.braid_id] = BraidHead(self.braid_head(d.braid_id).version + 1, s.seq)
            if d.vector is not None:
                self._dims.setdefault(d.vector.space, d.vector.dim)
            for level, index, h in self._frontier.push(merkle.leaf_hash(s.entry)):
                self._tree[(level, index)] = h
        return staged, seqs

    def spaces(self) -> dict[str, int]:
        """The vector spaces that hold at least one vector, with their dimension."""
        return dict(self._dims)

    def _lookup(self, ids: list[str]) -> dict[str, tuple[int, bytes]]:
        return {i: (seq, self._records[seq - 1][1]) for i in ids
                if (seq := self._ids.get(i)) is not None}

    # -- reading -----------------------------------------------------------------------------
    def read(self, seq: int) -> Record:
        """The record at ``seq``; IndexError when there is none."""
        if not 1 <= seq <= len(self._records):
            raise NoSuchSeq(f"no delta at seq {seq}; the log holds 1..{len(self._records)}")
        h, _, d = self._records[seq - 1]
        return Record(seq, h, d)

    def get(self, delta_id: str) -> Record | None:
        seq = self._ids.get(id_key(delta_id))
        return None if seq is None else self.read(seq)

    def seq_of(self, delta_id: str) -> int | None:
        return self._ids.get(id_key(delta_id))

    def body(self, seq: int) -> bytes:
        """The stored bytes of record ``seq`` (``hw || canonical delta``), as chained."""
        self.read(seq)
        return self._records[seq - 1][1]

    def entry(self, seq: int) -> bytes:
        """The committed form of record ``seq``: the chain's and the tree's input for it."""
        self.read(seq)
        return self._sealed[seq - 1][0]

    def scan_rows(self, start: int = 1, stop: int | None = None) -> Iterator[Row]:
        """The records with seq in [start, stop) as stored (Row)."""
        for seq in range(max(start, 1), min(stop or 2**63, len(self._records) + 1)):
            h, body, _ = self._records[seq - 1]
            entry, salt = self._sealed[seq - 1]
            by = self._erased.get(seq, 0)
            yield Row(seq, h, hw_of(body), entry, salt, b"" if by else body[HW_SIZE:], by)

    def scan(self, start: int = 1, stop: int | None = None, *, reverse: bool = False,
             limit: int | None = None) -> Iterator[Record]:
        seqs = range(max(start, 1), min(stop or 2**63, len(self._records) + 1))
        return self._emit(reversed(seqs) if reverse else seqs, limit)

    def scan_bodies(self, start: int = 1, stop: int | None = None
                    ) -> Iterator[tuple[int, bytes, bytes]]:
        """(seq, hash, body) for seqs in [start, stop), for verification and export."""
        for seq in range(max(start, 1), min(stop or 2**63, len(self._records) + 1)):
            h, body, _ = self._records[seq - 1]
            yield seq, h, body

    def _scan_index(self, index: str, key: str, start: int, stop: int | None, reverse: bool,
                    limit: int | None) -> Iterator[Record]:
        seqs = self._by.get((index, key), [])
        lo = bisect.bisect_left(seqs, start)
        hi = bisect.bisect_left(seqs, stop) if stop is not None else len(seqs)
        chosen = seqs[lo:hi]
        return self._emit(reversed(chosen) if reverse else chosen, limit)

    def _emit(self, seqs: Iterable[int], limit: int | None) -> Iterator[Record]:
        for n, seq in enumerate(seqs):
            if limit is not None and n >= limit:
                return
            yield self.read(seq)

    def counts(self, index: str) -> dict[str, int]:
        """Number of deltas per key of an index ("braid", "kind" or "refs")."""
        return {key: len(seqs) for (i, key), seqs in sorted(self._by.items()) if i == index}

    def head(self) -> Head:
        if not self._records:
            return Head(0, GENESIS)
        return Head(len(self._records), self._records[-1][0])

    def hash_at(self, seq: int) -> bytes:
        """The chain hash after record ``seq`` (GENESIS for 0)."""
        return GENESIS if seq == 0 else self.read(seq).hash

    def braid_head(self, braid_id: str) -> BraidHead:
        return self._braids.get(braid_id, BraidHead(0, 0))

    def braids(self) -> dict[str, BraidHead]:
        return dict(sorted(self._braids.items()))

    def seq_at(self, ts: datetime) -> int:
        """The last seq such that every delta up to it has ``ts`` at or before the given time."""
        return bisect.bisect_right(self._hw, ts_micros(ts))

    def verify(self, start: int = 1, stop: int | None = None, *,
               progress: Progress | None = None) -> Head:
        """Recompute the chain over [start, stop); the head of the range, or IntegrityError."""
        return verify_bodies(self, start, stop, progress)

    def erase(self, seqs: Iterable[int], delta: GenericDelta) -> tuple[Record, list[bytes]]:
        """Erase the records at ``seqs`` and append ``delta``, their ``erased`` delta
        (braidlog.erasure); its record and the erased records' commitments."""
        with self._lock:
            return self._erase({s: 0 for s in seqs}, check_batch([delta], self.registry,
                                                                  erasure=True))

    def apply_erasures(self, erase: Mapping[int, int], append: Callable[[Any], Any]
                       ) -> tuple[Any, list[bytes]]:
        """As LmdbLog.apply_erasures: the records erased (seq -> the seq erasing it), then
        ``append(self)``."""
        with self._lock:
            return self._erase(dict(erase), None, append)

    def _erase(self, by_seq: dict[int, int], checked: list[Checked] | None,
               append: Callable[[Any], Any] | None = None) -> tuple[Any, list[bytes]]:
        head = self.head().seq
        for s in sorted(by_seq):
            if not 1 <= s <= head:
                raise ValidationError("seq", f"seq {s} is not in the log (1..{head})")
            if s in self._erased:
                raise ValidationError("seq", f"seq {s} is already erased")
        commitments = []
        for s in sorted(by_seq):  # the delta and body become their erased forms, the salt goes
            h, body, d = self._records[s - 1]
            entry = self._sealed[s - 1][0]
            for key in payload_refs(d, self.registry):
                self._by[("refs", key)].remove(s)
            view = erased_delta(entry, by_seq[s] or head + 1)
            mark = view.erased
            assert mark is not None  # an erased delta carries its erasure
            self._records[s - 1] = (h, body[:HW_SIZE] + encode(view), view)
            self._sealed[s - 1] = (entry, b"")
            self._erased[s] = mark.by
            commitments.append(mark.commitment)
        for ckpt in [k for k in self._checkpoints if k[2] >= min(by_seq)]:
            del self._checkpoints[ckpt]  # they may hold what was erased
        if append is not None:
            return append(self), commitments
        staged, _ = self._place(checked, None, head)
        return Record(staged[0].seq, staged[0].hash, staged[0].delta), commitments

    # -- checkpoints ---------------------------------------------------------------------------
    def put_checkpoint(self, name: str, version: int, seq: int, blob: bytes) -> None:
        self._checkpoints[(name, version, seq)] = blob

    def checkpoint_seqs(self, name: str, version: int) -> list[int]:
        return sorted(s for (n, v, s) in self._checkpoints if n == name and v == version)

    def get_checkpoint(self, name: str, version: int, seq: int) -> bytes | None:
        return self._checkpoints.get((name, version, seq))

    def checkpoint_keys(self) -> list[tuple[str, int, int]]:
        return sorted(self._checkpoints)

    def projections_used(self) -> list[str]:
        return list(self._used)

    def use_projections(self, names: Iterable[str]) -> None:
        self._used.extend(n for n in dict.fromkeys(names) if n not in self._used)

    # -- the Merkle tree (braidlog/tree.py) and issued checkpoint notes ------------------------
    def tree_hashes(self, nodes: list[tuple[int, int]]) -> list[bytes]:
        """The hash of each complete subtree (level, index); a node past the head is an IndexError."""
        out = []
        for level, index in nodes:
            if ((index + 1) << level) > len(self._records) or index < 0 or level < 0:
                raise IndexError(f"no tree node ({level}, {index}): the log ends at seq "
                                 f"{len(self._records)}")
            out.append(merkle.leaf_hash(self._sealed[index][0]) if level == 0
                       else self._tree[(level, index)])
        return out

    def put_note(self, size: int, note: bytes) -> None:
        """Keep a checkpoint note issued for tree size ``size`` (the same note twice is kept once)."""
        self._notes[(size, digest(note)[:8])] = bytes(note)

    def notes(self, *, last: bool = False) -> list[tuple[int, bytes]]:
        """Every checkpoint note kept, as (tree size, note), smallest size first; with ``last``,
        only those of the largest size."""
        rows = [(size, note) for (size, _), note in sorted(self._notes.items())]
        return [r for r in rows if r[0] == rows[-1][0]] if last and rows else rows

    def close(self) -> None:
        pass

    def __enter__(self) -> MemoryLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


