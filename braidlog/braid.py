"""The facade an application embeds: ``braidlog.open(path)`` returns a ``Braid``.

A ``Braid`` owns one store and a set of live projections. It appends, runs commands through
deciders, checkpoints projection states, and answers ``at(point)`` with read-only views.

Commands are decided optimistically, as Equinox does: catch the live states up to the head H,
decide against them, and append with ``expected_head=H``; the store checks that inside its write
transaction, so a decision and its append are atomic with respect to every other writer
(thread or process). When another writer got in first the head moved: after ``retries``
optimistic attempts, the braid catches up and decides while holding the writer lock, in the
same transaction as the append, so it always makes progress and never decides on stale state.
A stale ``expected_version`` given by the caller is the caller's conflict: ``ConflictError``.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import msgspec

from .delta import GenericDelta, Provenance
from .errors import CheckpointWarning, ConflictError, StaleHead, ValidationError
from .kinds import REGISTRY, Registry
from .projection import Context, Decider, Projection
from .replay import (
    decode_state, encode_state, fold, load_checkpoint, stale_checkpoints, state_at,
    write_checkpoint,
)
from .store import BraidHead, Head, LogStore, MemoryLog, Progress, Record, resolve_point

__all__ = ["open", "Braid", "View", "ReadView", "DEFAULT_STORE", "Point"]

DEFAULT_STORE = "braid.lmdb"
Point = int | str | datetime


def open(path: str | os.PathLike[str] | None = DEFAULT_STORE, *,  # noqa: A001 - the API's verb
         projections: Iterable[Projection] | None = None, durable: bool = True,
         readonly: bool = False, create: bool = True, checkpoint_every: int = 5000,
         retries: int = 2, lazy: bool = False, registry: Registry = REGISTRY,
         **store_options: Any) -> Braid:
    """Open (or create) the store at ``path`` and keep ``projections`` live on it.

    ``path=None`` gives an in-memory store. ``projections=None`` finds them (``braidlog.apps``:
    installed entry points, braidlog's own families among them, and the modules named by
    ``BRAIDLOG_APP``) and keeps those the store has been used with; pass ``[]`` for none.
    ``lazy`` as for ``Braid``. The store records the projections it is opened with.
    """
    if path is None:
        store: LogStore = MemoryLog(registry)
    else:
        from .lmdb_log import LmdbLog

        store = LmdbLog(path, durable=durable, readonly=readonly, create=create,
                        registry=registry, **store_options)
    try:
        if projections is None:
            from .apps import discover, for_store

            projections, _ = for_store(discover(), store.projections_used())
        return Braid(store, projections, checkpoint_every=checkpoint_every, retries=retries,
                     lazy=lazy)
    except BaseException:
        store.close()
        raise


class Braid:
    """A store plus its live projections: append, execute commands, travel in time.

    The live states are caught up on open, unless ``lazy``: then on first use (``state``,
    ``execute``, ``catch_up`` …). Reads through views and checkpoints (``at``, ``state_at``,
    audit history) do not need them, and on a store without checkpoints (just imported, or
    written by a plain ``LmdbLog``) catching up means folding every projection over the log.
    """

    def __init__(self, store: LogStore, projections: Iterable[Projection] = (), *,
                 checkpoint_every: int = 5000, retries: int = 2, lazy: bool = False) -> None:
        if checkpoint_every < 1:
            raise ValidationError("checkpoint_every", "must be at least 1")
        self.log = store
        self.checkpoint_every = checkpoint_every
        self.retries = retries
        self.notices: list[str] = []
        self._deferred: list[int] | None = None
        self._projections: dict[str, Projection] = {}
        for p in projections:
            if p.name in self._projections:
                raise ValidationError("projections", f"two projections are named {p.name!r}")
            self._projections[p.name] = p
        self._order = list(self._projections.values())
        if self._order and not getattr(store, "readonly", False):
            store.use_projections(self._projections)
        for msg in stale_checkpoints(store, self._order):
            self._notice(msg)
        self._states: list[Any] = []
        self._seqs: list[int] = []
        self._load()
        self._live = False  # caught up at least once: close() checkpoints only then
        if not lazy:
            self.catch_up()

    def _load(self) -> None:
        """Each live state from its newest valid checkpoint (or initial)."""
        head = self.log.head().seq
        self._states, self._seqs = [], []
        for p in self._order:
            found = load_checkpoint(self.log, p, head, warn=self._notice)
            seq, state = found if found is not None else (0, p.start())
            self._states.append(state)
            self._seqs.append(seq)

    def _notice(self, message: str) -> None:
        self.notices.append(message)
        warnings.warn(message, CheckpointWarning, stacklevel=4)

    # -- projections ---------------------------------------------------------------------------
    @property
    def projections(self) -> Mapping[str, Projection]:
        return dict(self._projections)

    def projection(self, name: str) -> Projection:
        try:
            return self._projections[name]
        except KeyError:
            raise ValidationError(
                "projection", f"no projection {name!r}; open with one of {sorted(self._projections)}"
            ) from None

    def state(self, name: str) -> Any:
        """The live state of projection ``name`` at the head (caught up first). Do not mutate it."""
        self.projection(name)
        self.catch_up()
        return self._states[self._index(name)]

    def _index(self, name: str) -> int:
        return self._order.index(self._projections[name])

    @property
    def seq(self) -> int:
        """The seq the live states stand at."""
        return min(self._seqs, default=self.log.head().seq)

    def catch_up(self, *, progress: Progress | None = None) -> int:
        """Fold every new delta into the live states, checkpointing on the way; the head seq."""
        self._live = True
        head = self.log.head().seq
        if not self._order:
            return head
        every, done = self.checkpoint_every, 0
        while (at := min(self._seqs)) < head:
            boundary = (at // every + 1) * every  # fold segment by segment, checkpointing between
            stop = min(head, boundary)
            try:
                fold(self.log, self._order, self._states, self._seqs, stop,
                     progress=None if progress is None else lambda n, base=done: progress(base + n))
            except BaseException:
                # evolve updates states in place: a fold cut short (an error, Ctrl-C, a progress
                # callback that cancels) leaves them ahead of their seqs. Start again from the
                # checkpoints rather than fold any delta twice.
                self._load()
                raise
            done += stop - at
            if stop == boundary:
                self._checkpoint_all(stop)
        return head

    def _checkpoint_all(self, seq: int) -> None:
        if self.log_readonly:
            return
        if self._deferred is not None:  # inside the writer lock: write after it is released
            self._deferred.append(seq)
            return
        for p, state, at in zip(self._order, self._states, self._seqs):
            if at == seq:  # a state that stands further on (added later, loaded ahead) is not at seq
                write_checkpoint(self.log, p, seq, state)

    def checkpoint(self) -> int:
        """Checkpoint every live state at the head now; the seq checkpointed."""
        head = self.catch_up()
        if head:
            self._checkpoint_all(head)
        return head

    @property
    def log_readonly(self) -> bool:
        return bool(getattr(self.log, "readonly", False))

    def rebuild(self, *, progress: Progress | None = None) -> int:
        """Drop the live states and fold the whole log again (checkpoints rewritten on the way)."""
        self._states = [p.start() for p in self._order]
        self._seqs = [0 for _ in self._order]
        return self.catch_up(progress=progress)

    # -- writing -------------------------------------------------------------------------------
    def append(self, delta: GenericDelta, *, expected_version: int | None = None) -> int:
        """Append one delta; return its seq. Live states follow."""
        return self.log.append(delta, expected_version=expected_version)

    def append_batch(self, deltas: Iterable[GenericDelta], *,
                     expected_version: int | Mapping[str, int] | None = None) -> list[int]:
        """Append deltas atomically; return their seqs."""
        return self.log.append_batch(deltas, expected_version=expected_version)

    def execute(self, decider: Decider | str, command: Any, *, braid_id: str,
                provenance: Provenance | str = "system", now: datetime | None = None,
                confidence: float = 1.0, expected_version: int | None = None) -> list[Record]:
        """Decide ``command`` against the state at the head and append the result atomically.

        Returns the records appended ([] when the command was already done). ``Rejected`` or
        ``ValidationError`` from decide propagate and nothing is appended.
        """
        if isinstance(decider, str):
            decider = self.projection(decider)  # type: ignore[assignment]
        if not isinstance(decider, Decider):
            raise ValidationError("decider", f"{decider!r} is not a Decider")
        if decider.name not in self._projections:
            raise ValidationError("decider", f"{decider.name!r} is not a projection of this braid")
        if isinstance(provenance, str):
            try:
                provenance = msgspec.convert({"kind": provenance}, Provenance)
            except msgspec.ValidationError:
                raise ValidationError("provenance.kind", f"unknown provenance kind {provenance!r}") from None
        if now is not None and now.tzinfo is None:
            raise ValidationError("now", "must be a timezone-aware datetime")
        i = self._index(decider.name)

        def decide(head: int) -> list[GenericDelta]:
            ctx = Context(now=now or datetime.now(timezone.utc), braid_id=braid_id,
                          provenance=provenance, confidence=confidence, head=head,
                          log=ReadView(self.log, head))
            return decider.decide(command, self._states[i], ctx)

        for _ in range(self.retries):
            head = self.catch_up()
            deltas = decide(head)
            if not deltas:
                return []
            try:
                return self.log.commit(deltas, expected_head=head, expected_version=expected_version)
            except StaleHead:
                continue
        return self._execute_locked(decide, expected_version)

    def _execute_locked(self, decide, expected_version) -> list[Record]:
        """Catch up and decide while holding the writer lock: no other writer can get in."""
        def prepare(head: Head) -> list[GenericDelta]:
            self.catch_up()
            if self.seq != head.seq:
                raise ConflictError(f"the live state stands at {self.seq}, the head at {head.seq}",
                                    expected=head.seq, actual=self.seq)
            return decide(head.seq)

        self._deferred = []
        try:
            return self.log.commit_locked(prepare, expected_version=expected_version)
        finally:
            pending, self._deferred = self._deferred, None
            if pending:  # the states stand at the head they were caught up to: checkpoint there
                self._checkpoint_all(self.seq)

    # -- reading -------------------------------------------------------------------------------
    def head(self) -> Head:
        return self.log.head()

    def resolve(self, point: Point) -> int:
        """The seq a point names: a seq, a delta id, or a datetime (the last seq up to which every
        delta has ``ts`` at or before it)."""
        return resolve_point(self.log, point)

    def at(self, point: Point) -> View:
        """A read-only view of the log and every projection as of ``point``."""
        return View(self, self.resolve(point))

    def state_at(self, name: str, seq: int) -> Any:
        """The state of projection ``name`` after deltas 1..seq (a fresh object you own)."""
        p = self.projection(name)
        i = self._index(name)
        if self._seqs[i] == seq:
            return decode_state(p, encode_state(self._states[i]))
        return state_at(self.log, p, seq, warn=self._notice)

    def recall(self, query: Any, k: int = 10, *, as_of: Point | None = None,
               space: str = "default", metric: str = "cosine", **filters: Any) -> list[Any]:
        """The k deltas closest to ``query`` (text or vector), as of a point when given, with
        filters applied before the top k is cut (docs/recall.md)."""
        from .recall import recall_for

        seq = None if as_of is None else self.resolve(as_of)
        return recall_for(self, space, metric).recall(query, k, as_of=seq, **filters)

    def close(self) -> None:
        """Checkpoint the live states (unless a lazy braid never caught them up), save the
        recall index, and close the store."""
        try:
            if "braidlog.recall" in sys.modules:  # only if recall was used: it pulls in hnswlib
                sys.modules["braidlog.recall"].close_for(self)
            if not self.log_readonly and self._order and self._live:
                self.checkpoint()
        finally:
            self.log.close()

    def __enter__(self) -> Braid:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ReadView:
    """A store seen as of ``seq``: reads and scans stop there; nothing can be written."""

    def __init__(self, store: LogStore, seq: int) -> None:
        self._store = store
        self.seq = seq

    @property
    def registry(self) -> Registry:
        return self._store.registry

    def head(self) -> Head:
        return Head(self.seq, self._store.hash_at(self.seq))

    def read(self, seq: int) -> Record:
        if not 1 <= seq <= self.seq:
            raise IndexError(f"no delta at seq {seq} as of seq {self.seq}")
        return self._store.read(seq)

    def get(self, delta_id: str) -> Record | None:
        seq = self._store.seq_of(delta_id)
        return None if seq is None or seq > self.seq else self._store.read(seq)

    def seq_of(self, delta_id: str) -> int | None:
        seq = self._store.seq_of(delta_id)
        return None if seq is None or seq > self.seq else seq

    def _stop(self, stop: int | None) -> int:
        return self.seq + 1 if stop is None else min(stop, self.seq + 1)

    def scan(self, start: int = 1, stop: int | None = None, **kw: Any) -> Iterator[Record]:
        return self._store.scan(start, self._stop(stop), **kw)

    def scan_braid(self, braid_id: str, start: int = 1, stop: int | None = None, **kw: Any) -> Iterator[Record]:
        return self._store.scan_braid(braid_id, start, self._stop(stop), **kw)

    def scan_kind(self, kind: str, start: int = 1, stop: int | None = None, **kw: Any) -> Iterator[Record]:
        return self._store.scan_kind(kind, start, self._stop(stop), **kw)

    def scan_refs(self, entity_id: str, start: int = 1, stop: int | None = None, **kw: Any) -> Iterator[Record]:
        return self._store.scan_refs(entity_id, start, self._stop(stop), **kw)

    def braid_head(self, braid_id: str) -> BraidHead:
        """The braid as of this view: counted over deltas 1..seq, which no writer can change
        (mixing the live head with a count of later deltas raced with appends)."""
        current = self._store.braid_head(braid_id)
        if current.seq <= self.seq:
            return current
        seqs = [r.seq for r in self.scan_braid(braid_id)]
        return BraidHead(len(seqs), seqs[-1] if seqs else 0)


class View:
    """A braid as of one seq: the log up to it and every projection's state there. Read-only."""

    def __init__(self, braid: Braid, seq: int) -> None:
        self.braid = braid
        self.seq = seq
        self.log = ReadView(braid.log, seq)
        self._cache: dict[str, Any] = {}

    def head(self) -> Head:
        return self.log.head()

    def state(self, name: str) -> Any:
        """The state of projection ``name`` after deltas 1..seq (computed once per view)."""
        if name not in self._cache:
            self._cache[name] = self.braid.state_at(name, self.seq)
        return self._cache[name]

    def states(self, names: Sequence[str] | None = None) -> dict[str, Any]:
        return {n: self.state(n) for n in (names or self.braid.projections)}

    def recall(self, query: Any, k: int = 10, *, space: str = "default", metric: str = "cosine",
               **filters: Any) -> list[Any]:
        """Recall as of this view's seq: only deltas up to it are eligible."""
        from .recall import recall_at

        return recall_at(self, query, k, space=space, metric=metric, **filters)
