"""The facade an application embeds: ``braidlog.open(path)`` returns a ``Braid``.

A ``Braid`` owns one store and a set of live projections. It appends, runs commands through
deciders, checkpoints projection states, and answers ``at(point)`` with read-only views. It
folds the projections its caller passes (``open`` without them finds the installed ones
through ``braidlog.apps``); the engine never imports ``braidlog.projections``.

Every write (``append``, ``append_batch``, ``commit``, ``execute``) passes the boundary: the
checks of the projections that read a new delta run inside the store's write transaction,
against their live states with the batch's earlier deltas folded in (``braidlog.projection``
says what a check may do). A batch that passes is folded into the live states as it is checked,
so they stand at the new head without reading it back. A refused batch writes nothing, and the
live states that had taken in its earlier deltas are reloaded from their checkpoints and the log.

Commands are decided optimistically, as Equinox does: catch the live states up to the head H,
decide against them, and append with ``expected_head=H``; the store checks that inside its write
transaction, so a decision and its append are atomic with respect to every other writer
(thread or process). When another writer got in first the head moved: after ``retries``
optimistic attempts, the braid catches up and decides while holding the writer lock, in the
same transaction as the append, so it always makes progress and never decides on stale state.
A stale ``expected_version`` given by the caller is the caller's conflict: ``ConflictError``.
"""

from __future__ import annotations

import functools
import itertools
import numbers
import os
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar, cast

import msgspec
from msgspec import Struct

from .command import command_fault
from .delta import PROVENANCE_KINDS, GenericDelta, Provenance, ProvenanceKind
from .erasure import ErasureReport
from .errors import BraidlogError, CheckpointWarning, ConflictError, NoSuchSeq, Rejected, StaleHead, ValidationError
from .kinds import REGISTRY, Registry
from .projection import Boundary, Context, Decider, Projection
from .replay import (
    check_step,
    collector_paused,
    decode_state,
    encode_state,
    fold,
    fold_step,
    load_checkpoint,
    stale_checkpoints,
    state_at,
    write_encoded_checkpoint,
)
from .store import BraidHead, FullStore, Head, LogReader, MemoryLog, Progress, Record, Staged, resolve_point
from .store.arguments import checked_reads, durability, flag, whole
from .store.arguments import name as text_arg

__all__ = ["Braid", "View", "ReadView", "BatchView", "DEFAULT_STORE", "Point"]

DEFAULT_STORE = "braid.lmdb"
Point = int | str | datetime


def open(path: str | os.PathLike[str] | None = DEFAULT_STORE, *,  # shadows the builtin: the API's verb
         projections: Iterable[Projection] | None = None, durable: bool | str = True,
         readonly: bool = False, create: bool = True, checkpoint_every: int = 5000,
         retries: int = 2, lazy: bool = False, registry: Registry = REGISTRY,
         **store_options: Any) -> Braid:
    """Open (or create) the store at ``path`` and keep ``projections`` live on it.

    ``path=None`` gives an in-memory store. ``projections=None`` finds them (``braidlog.apps``:
    installed entry points, braidlog's own families among them, and the modules named by
    ``BRAIDLOG_APP``) and keeps those the store has been used with; pass ``[]`` for none.
    ``lazy`` as for ``Braid``. The store records the projections it is opened with.
    """
    for field, value in (("readonly", readonly), ("create", create), ("lazy", lazy)):
        flag(value, field)
    durability(durable)
    if path is None:
        store: FullStore = MemoryLog(registry)
    else:
        from .lmdb.log import LmdbLog

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


T = TypeVar("T")


def _offset(progress: Callable[[int], Any], base: int) -> Callable[[int], Any]:
    """``progress`` told each count ``base`` higher (a fold's segment after the first)."""
    return lambda n: progress(base + n)


def _space_and_metric(space: Any, metric: Any) -> None:
    """A recall's space is a name and its metric one of recall's (checked before either keys
    an index)."""
    text_arg(space, "space")
    if metric not in ("cosine", "ip") or not isinstance(metric, str):
        raise ValidationError("metric", f"must be 'cosine' or 'ip', not {metric!r}"[:200])


class Braid:
    """A store plus its live projections: append, execute commands, travel in time.

    The live states are caught up on open, unless ``lazy``: then on first use (``state``,
    ``execute``, ``catch_up`` …). Reads through views and checkpoints (``at``, ``state_at``,
    audit history) do not need them, and on a store without checkpoints (just imported, or
    written by a plain ``LmdbLog``) catching up means folding every projection over the log.
    """

    def __init__(self, store: FullStore, projections: Iterable[Projection] = (), *,
                 checkpoint_every: int = 5000, retries: int = 2, lazy: bool = False) -> None:
        if not all(callable(getattr(store, m, None)) for m in ("head", "commit", "scan", "checkpoint_keys")):
            raise ValidationError("store", f"must be a log store (MemoryLog, LmdbLog, a SyncLog …), not "
                                  f"{type(store).__name__}")
        flag(lazy, "lazy")
        for name, value, least in (("checkpoint_every", checkpoint_every, 1), ("retries", retries, 0)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
                raise ValidationError(name, f"must be a whole number, at least {least}, not "
                                      f"{value if isinstance(value, numbers.Integral) else type(value).__name__}")
        if isinstance(projections, (str, bytes, Mapping)) or not isinstance(projections, Iterable):
            raise ValidationError("projections", "must be a list of Projection, not "
                                  f"{type(projections).__name__}")
        projections = list(projections)
        for p in projections:
            if not isinstance(p, Projection):
                raise ValidationError("projections", f"must be a list of Projection; it holds a "
                                      f"{type(p).__name__}")
        self.log = store
        self._closed = False
        self.checkpoint_every = checkpoint_every
        self.retries = retries
        self.notices: list[str] = []
        # Checkpoints taken while the writer lock is held, written once it is free: those the
        # catch-up passed (of committed deltas), and those a batch being written passed (kept
        # only if it commits). Each is (seq, [(projection, encoded state)]).
        self._deferred: list[tuple[int, list[tuple[Projection, bytes]]]] | None = None
        self._folded = False  # a batch being written was folded into the live states
        self._snapshots: list[tuple[int, list[tuple[Projection, bytes]]]] = []
        self._projections: dict[str, Projection] = {}
        for p in projections:
            if p.name in self._projections:
                raise ValidationError("projections", f"two projections are named {p.name!r}")
            self._projections[p.name] = p
        self._order = list(self._projections.values())
        if self._order and not store.readonly:
            store.use_projections(self._projections)
        self._checked = [i for i, p in enumerate(self._order) if p.check is not None]
        # a projection with a check reads every delta: every batch goes through the checks
        self._checks_every = any(self._order[i].kinds is None for i in self._checked)
        self._steps: dict[str, tuple[Any, Any]] = {}  # kind -> the boundary's steps (_steps_of)
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
        text_arg(name, "projection")
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
        return min(self._seqs) if self._seqs else self.log.head().seq

    def catch_up(self, *, progress: Progress | None = None) -> int:
        """Fold every new delta into the live states, checkpointing on the way; the head seq."""
        if progress is not None and not callable(progress):
            raise ValidationError("progress", f"must be a function of (done, total) or None, not "
                                  f"{type(progress).__name__}")
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
                     progress=None if progress is None else _offset(progress, done))
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
        """Checkpoint the states that stand at ``seq``; inside the writer lock, take them now and
        write them once it is free."""
        if self.log_readonly:
            return
        taken = [(p, encode_state(state))
                 for p, state, at in zip(self._order, self._states, self._seqs, strict=False) if at == seq]
        if self._deferred is not None:
            self._deferred.append((seq, taken))
        else:
            self._write_checkpoints([(seq, taken)])

    def _write_checkpoints(self, taken: list[tuple[int, list[tuple[Projection, bytes]]]]) -> None:
        for seq, states in taken:
            for p, data in states:
                write_encoded_checkpoint(self.log, p, seq, data)

    def checkpoint(self) -> int:
        """Checkpoint every live state at the head now; the seq checkpointed."""
        head = self.catch_up()
        if head:
            self._checkpoint_all(head)
        return head

    @property
    def log_readonly(self) -> bool:
        return self.log.readonly

    def rebuild(self, *, progress: Progress | None = None) -> int:
        """Drop the live states and fold the whole log again (checkpoints rewritten on the way)."""
        if progress is not None and not callable(progress):
            raise ValidationError("progress", f"must be a function of (done, total) or None, not "
                                  f"{type(progress).__name__}")
        self._states = [p.start() for p in self._order]
        self._seqs = [0 for _ in self._order]
        return self.catch_up(progress=progress)

    # -- writing -------------------------------------------------------------------------------
    def append(self, delta: GenericDelta, *, expected_version: int | None = None) -> int:
        """Append one delta through the boundary; return its seq. Live states follow."""
        return self.append_batch([delta], expected_version=expected_version)[0]

    def append_batch(self, deltas: Iterable[GenericDelta], *,
                     expected_version: int | Mapping[str, int] | None = None,
                     expected_head: int | None = None,
                     salts: Mapping[str, bytes] | None = None) -> list[int]:
        """Append deltas atomically through the boundary; return their seqs (a delta already
        stored with the same bytes keeps its seq and is not checked again). ``salts`` (delta
        id -> 16 bytes) reproduces records written elsewhere (import)."""
        if not self._checked:
            return self.log.append_batch(deltas, expected_version=expected_version,
                                         expected_head=expected_head, salts=salts)
        return self._through_boundary(lambda: self.log.append_batch(
            deltas, expected_version=expected_version, expected_head=expected_head,
            admit=self._admit, salts=salts))

    def commit(self, deltas: Iterable[GenericDelta], *,
               expected_version: int | Mapping[str, int] | None = None,
               expected_head: int | None = None,
               salts: Mapping[str, bytes] | None = None) -> list[Record]:
        """Append deltas atomically through the boundary; return the records written (none
        for a pure idempotent retry)."""
        if not self._checked:
            return self.log.commit(deltas, expected_version=expected_version,
                                   expected_head=expected_head, salts=salts)
        return self._through_boundary(lambda: self.log.commit(
            deltas, expected_version=expected_version, expected_head=expected_head,
            admit=self._admit, salts=salts))

    def _through_boundary(self, write: Callable[[], T]) -> T:
        """Run a store write whose ``admit`` is ``_admit``: checkpoints the fold reaches while
        the writer lock is held are written after it; a write that fails after its batch was
        folded into the live states (a refusal, a store error) reloads them."""
        self._deferred, self._folded, self._snapshots = [], False, []
        committed = reloaded = False
        try:
            result = write()
            committed = True
            return result
        except BaseException:
            if self._folded:  # evolve updated the states in place: take them back to the head
                self._load()
                reloaded = True
            raise
        finally:
            taken = self._deferred + (self._snapshots if committed else [])
            self._deferred, self._folded, self._snapshots = None, False, []
            if not self.log_readonly:
                self._write_checkpoints(taken)
            if reloaded:
                try:
                    self.catch_up()  # the lock is free: back to the head, without the batch
                except BraidlogError:
                    pass  # they catch up on next use; the error the caller sees is the write's

    def _admit(self, head: Head, staged: list[Staged]) -> None:
        """The boundary, inside the store's write transaction: check each new delta against
        the states of the projections that read it, then fold it into every live state, so
        the next delta of the batch is checked against the state with this one applied."""
        order = self._order
        if not (self._checks_every or any(order[i].reads(s.delta) for s in staged
                                          for i in self._checked)):
            return  # nothing here for a check: the live states follow the log as usual
        if self._folded or max(self._seqs, default=0) > head.seq:
            self._load()  # a write attempt ran again (the map grew): start from the checkpoints
            self._snapshots = []
        if min(self._seqs) == head.seq:
            self._live = True  # at the head already: what catch_up would find, without a read
        else:
            self.catch_up()
        if self.seq != head.seq:
            raise ConflictError(f"the live states stand at seq {self.seq}, the head at {head.seq}",
                                expected=head.seq, actual=self.seq)
        with collector_paused():  # a fold, as catch-up's: no collector passes over the states
            self._check_and_fold(head, staged)
        self._seqs = [staged[-1].seq] * len(order)

    def _check_and_fold(self, head: Head, staged: list[Staged]) -> None:
        """``_admit``'s loop: each delta checked by the projections that read it, then folded
        into their states, through two steps made on each kind's first delta: its checks in
        the projections' order (``replay.check_step``) and its evolve calls
        (``replay.fold_step``, as a replay folds)."""
        order, states, every = self._order, self._states, self.checkpoint_every
        ids: dict[str, Staged] = {}  # shared by the batch's views, filled on first lookup
        base, steps = ReadView(self.log, head.seq), self._steps
        for n, s in enumerate(staged):
            d = s.delta
            if d.erased is not None:  # reproduced erased: no check; each projection its own way
                for i, p in enumerate(order):
                    if p.reads(d):
                        self._folded = True
                        states[i] = p.apply(states[i], d, s.seq)
            else:
                check, step = steps.get(d.kind) or self._steps_of(d.kind)
                if check is not None:
                    try:
                        check(d, states, Boundary(s.seq, n, BatchView(base, staged, n, ids)))
                    except Rejected as e:
                        raise Rejected(f"delta {n}: {e.reason}") from None
                    except ValidationError as e:
                        raise ValidationError(e.field, e.rule, index=n) from None
                if step:
                    self._folded = True
                    step(d, s.seq, states)
            if s.seq % every == 0:  # a checkpoint boundary: written if it commits
                self._snapshots.append((s.seq, [(p, encode_state(st)) for p, st in zip(order, states, strict=False)]))

    def _steps_of(self, kind: str) -> tuple[Any, Any]:
        """The boundary's two steps for the deltas of ``kind`` (kept for the braid's life): its
        checks (None if none reads it) and its evolve calls (None if no projection may read
        it)."""
        order = self._order
        folds = None
        if any(p.kinds is None or kind in p.kinds or p.refs or p.provenances for p in order):
            folds = fold_step(kind, order, list(range(len(order))),
                              frozenset().union(*(p.provenances for p in order)))
        got = self._steps[kind] = (check_step(kind, order), folds)
        return got

    def execute(self, decider: Decider | str, command: Any, *, braid_id: str,
                provenance: Provenance | str = "system", now: datetime | None = None,
                confidence: float | None = None, expected_version: int | None = None) -> list[Record]:
        """Decide ``command`` against the state at the head and append the result atomically.

        Returns the records appended ([] when the command was already done). ``Rejected`` or
        ``ValidationError`` from decide propagate and nothing is appended.
        """
        if isinstance(decider, str):
            decider = self.projection(decider)  # type: ignore[assignment]  # a projection by name; a Decider or refused below
        if not isinstance(decider, Decider):
            if isinstance(decider, Projection):
                raise ValidationError("decider", f"projection {decider.name!r} is not a Decider: "
                                      "it folds the log but decides no commands")
            raise ValidationError("decider", f"must be a Decider or the name of a projection of "
                                  f"this braid, not {type(decider).__name__}")
        if decider.name not in self._projections:
            raise ValidationError("decider", f"{decider.name!r} is not a projection of this braid")
        if isinstance(provenance, str):
            if provenance not in PROVENANCE_KINDS:
                raise ValidationError("provenance.kind", f"unknown provenance kind {provenance!r}: "
                                      f"one of {', '.join(PROVENANCE_KINDS)}")
            provenance = Provenance(kind=cast(ProvenanceKind, provenance))  # one of them: checked above
        elif not isinstance(provenance, Provenance):
            raise ValidationError("provenance", f"must be a provenance kind ({', '.join(PROVENANCE_KINDS)}) "
                                  f"or a Provenance, not {type(provenance).__name__}")
        if now is not None and (not isinstance(now, datetime) or now.tzinfo is None):
            raise ValidationError("now", "must be a timezone-aware datetime"
                                  + ("" if isinstance(now, datetime) else f", not {type(now).__name__}"))
        if not isinstance(braid_id, str):
            raise ValidationError("braid_id", f"must be a string, not {type(braid_id).__name__}")
        if confidence is not None and (not isinstance(confidence, numbers.Real)
                                       or isinstance(confidence, bool)):
            raise ValidationError("confidence", f"must be a number in [0, 1], not {type(confidence).__name__}")
        i = self._index(decider.name)

        def decide(head: int) -> list[GenericDelta]:
            ctx = Context(now=now or datetime.now(UTC), braid_id=braid_id,
                          provenance=provenance, confidence=confidence, head=head,
                          log=ReadView(self.log, head))
            try:
                return decider.decide(command, self._states[i], ctx)
            except BraidlogError:
                raise
            except Exception as e:
                # A command whose fields do not match their declared types can crash a decide
                # that trusted them: blame the command then; a well-formed one that crashes
                # decide is a bug, and goes through as it is.
                fault = command_fault(command)
                if fault is None:
                    raise
                raise fault from e

        for _ in range(self.retries):
            head = self.catch_up()
            deltas = decide(head)
            if not deltas:
                return []
            try:
                return self.commit(deltas, expected_head=head, expected_version=expected_version)
            except StaleHead:
                continue
        return self._execute_locked(decide, expected_version)

    def _execute_locked(self, decide: Callable[[int], list[GenericDelta]],
                        expected_version: int | None) -> list[Record]:
        """Catch up and decide while holding the writer lock: no other writer can get in."""
        def prepare(head: Head) -> list[GenericDelta]:
            self.catch_up()
            if self.seq != head.seq:
                raise ConflictError(f"the live state stands at {self.seq}, the head at {head.seq}",
                                    expected=head.seq, actual=self.seq)
            return decide(head.seq)

        admit = self._admit if self._checked else None
        return self._through_boundary(lambda: self.log.commit_locked(
            prepare, expected_version=expected_version, admit=admit))

    # -- erasing -------------------------------------------------------------------------------
    def erase(self, *, braid: str | None = None, refers: str | None = None,
              seqs: Iterable[int] | int | None = None, reason: str,
              now: datetime | None = None) -> ErasureReport:
        """Erase the deltas of ``braid``, those that refer to ``refers`` and those at ``seqs``
        (they add up): drop their payloads, salts, vectors and derived text from every file of
        the store, keep their envelopes and commitments, and append one ``erased`` delta naming
        the seqs and ``reason`` (kept in clear: no personal data). Erasure is retroactive: every
        view, at any seq, shows them erased. The store must be open here alone (no other
        process, no other handle): StorageError otherwise, and nothing is changed.
        docs/forgetting.md. ``braidlog.proofs.issue_receipt`` signs a receipt of the report."""
        from . import erasure

        reason = erasure.check_reason(reason)
        if now is not None and (not isinstance(now, datetime) or now.tzinfo is None):
            raise ValidationError("now", "must be a timezone-aware datetime")
        if self.log_readonly:
            raise ValidationError("store", "is open read-only; open it writable to erase")
        chosen = erasure.select(self.log, braid=braid, refers=refers, seqs=seqs)
        d = erasure.erasure_delta(chosen.seqs, reason, now=now)
        if isinstance(refers, str):  # so that `history` of it can tell it was erased, and by which seq
            d = msgspec.structs.replace(d, tags=(erasure.subject_tag(refers),))
        self.after_erasure()  # before: an index saved meanwhile would hold the text
        record, commitments = self.log.erase(chosen.seqs, d)
        self.after_erasure()
        return erasure.ErasureReport(chosen.seqs, tuple(zip(chosen.seqs, commitments, strict=False)),
                                     chosen.skipped, record.seq, d.payload["reason_sha256"],
                                     chosen.what)

    def after_erasure(self) -> None:
        """Drop what this braid holds of erased records: the live states (folded again from
        the checkpoints the erasure kept, on next use) and the recall indexes (their text and
        vectors; built again from the log), unsaved."""
        if "braidlog.recall" in sys.modules:
            sys.modules["braidlog.recall"].discard_for(self)
        self._load()
        self._live = False

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
        whole(seq, "seq")
        i = self._index(name)
        if self._seqs[i] == seq:
            return decode_state(p, encode_state(self._states[i]))
        return state_at(self.log, p, seq, warn=self._notice)

    def recall(self, query: Any, k: int = 10, *, as_of: Point | None = None,
               space: str = "default", metric: Literal["cosine", "ip"] = "cosine", **filters: Any) -> list[Any]:
        """The k deltas closest to ``query`` (text or vector), as of a point when given, with
        filters applied before the top k is cut (docs/recall.md)."""
        from .recall import recall_for

        _space_and_metric(space, metric)
        seq = None if as_of is None else self.resolve(as_of)
        return recall_for(self, space, metric).recall(query, k, as_of=seq, **filters)

    def record_context(self, items: Iterable[Any], *, run: Any, turn: Any, model: str | None = None,
                       context_bytes: bytes | str | None = None, role: str = "injected",
                       braid_id: str = "context") -> str:
        """Record a context receipt (a ``context_used`` delta): ``items`` (recall hits, records,
        seqs or delta ids) were given to a model in turn ``turn`` of run ``run``, with the
        SHA-256 of the exact ``context_bytes`` when given. Returns the receipt's delta id; an
        item that is not a record of the log is refused and nothing is written
        (docs/receipts.md)."""
        from .receipts.record import record_context

        return record_context(self, items, run=run, turn=turn, model=model,
                              context_bytes=context_bytes, role=role, braid_id=braid_id)

    def close(self) -> None:
        """Checkpoint the live states (unless a lazy braid never caught them up), save the
        recall index, and close the store. Closing a closed braid does nothing."""
        if self._closed:
            return
        self._closed = True
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


@checked_reads
class ReadView(LogReader):
    """A store seen as of ``seq`` (a ``LogReader``): reads and scans stop there; nothing can be
    written."""

    def __init__(self, store: FullStore, seq: int) -> None:
        self._store = store
        self.seq = seq

    @property
    def registry(self) -> Registry:
        return self._store.registry

    def head(self) -> Head:
        return Head(self.seq, self._store.hash_at(self.seq))

    def read(self, seq: int) -> Record:
        if not 1 <= seq <= self.seq:
            raise NoSuchSeq(f"no delta at seq {seq} as of seq {self.seq}")
        return self._store.read(seq)

    def get(self, delta_id: str) -> Record | None:
        seq = self._store.seq_of(delta_id)
        return None if seq is None or seq > self.seq else self._store.read(seq)

    def seq_of(self, delta_id: str) -> int | None:
        seq = self._store.seq_of(delta_id)
        return None if seq is None or seq > self.seq else seq

    def _stop(self, stop: int | None) -> int:
        return self.seq + 1 if stop is None else min(stop, self.seq + 1)

    def scan(self, start: int = 1, stop: int | None = None, *, reverse: bool = False,
             limit: int | None = None) -> Iterator[Record]:
        return self._store.scan(start, self._stop(stop), reverse=reverse, limit=limit)

    def scan_braid(self, braid_id: str, start: int = 1, stop: int | None = None, *,
                   reverse: bool = False, limit: int | None = None) -> Iterator[Record]:
        return self._store.scan_braid(braid_id, start, self._stop(stop), reverse=reverse, limit=limit)

    def scan_kind(self, kind: str, start: int = 1, stop: int | None = None, *,
                  reverse: bool = False, limit: int | None = None) -> Iterator[Record]:
        return self._store.scan_kind(kind, start, self._stop(stop), reverse=reverse, limit=limit)

    def scan_refs(self, entity_id: str, start: int = 1, stop: int | None = None, *,
                  reverse: bool = False, limit: int | None = None) -> Iterator[Record]:
        return self._store.scan_refs(entity_id, start, self._stop(stop), reverse=reverse, limit=limit)

    def braid_head(self, braid_id: str) -> BraidHead:
        """The braid as of this view: counted over deltas 1..seq, which no writer can change
        (mixing the live head with a count of later deltas raced with appends)."""
        current = self._store.braid_head(braid_id)
        if current.seq <= self.seq:
            return current
        seqs = [r.seq for r in self.scan_braid(braid_id)]
        return BraidHead(len(seqs), seqs[-1] if seqs else 0)


class BatchView(Struct, frozen=True):
    """The log as a boundary check sees it (a ``LogReader``): ``base``, the store as of the head
    a batch is written after, followed by the batch's records ``staged[:upto]``, those before
    the delta checked. What ``base`` answers, with the batch's records added. The views of one
    batch share ``base`` and ``ids`` (delta id -> staged record over the whole batch, built on
    the first lookup). A frozen Struct: the boundary makes one a delta, in C."""

    _base: ReadView
    _all: Sequence[Staged]
    _upto: int
    _ids: dict[str, Staged]

    @property
    def seq(self) -> int:
        """The seq of the head the batch is written after."""
        return self._base.seq

    @property
    def registry(self) -> Registry:
        return self._base.registry

    @property
    def _staged(self) -> Sequence[Staged]:
        return self._all[:self._upto]

    def before(self, n: int) -> BatchView:
        """The view a check of the batch's delta ``n`` sees: the head and deltas 0..n-1."""
        return BatchView(self._base, self._all, n, self._ids)

    def _mine(self, delta_id: str) -> Staged | None:
        ids = self._ids
        if not ids and self._all:
            ids.update((st.delta.id.upper(), st) for st in self._all)
        found = ids.get(delta_id.upper())
        return found if found is not None and found.seq <= self._base.seq + self._upto else None

    def head(self) -> Head:
        if not self._upto:
            return self._base.head()
        last = self._all[self._upto - 1]
        return Head(last.seq, last.hash)

    def read(self, seq: int) -> Record:
        if seq > self._base.seq:
            k = seq - self._base.seq - 1
            if k < self._upto:
                s = self._all[k]
                return Record(s.seq, s.hash, s.delta)
        return self._base.read(seq)

    def get(self, delta_id: str) -> Record | None:
        s = self._mine(delta_id)
        return Record(s.seq, s.hash, s.delta) if s is not None else self._base.get(delta_id)

    def seq_of(self, delta_id: str) -> int | None:
        s = self._mine(delta_id)
        return s.seq if s is not None else self._base.seq_of(delta_id)

    def _merged(self, base: Any, keep: Any, start: int, stop: int | None, reverse: bool,
                limit: int | None) -> Iterator[Record]:
        ours = [Record(s.seq, s.hash, s.delta) for s in self._staged
                if start <= s.seq and (stop is None or s.seq < stop) and keep(s)]
        theirs = base(start, stop, reverse=reverse)
        both = (itertools.chain(reversed(ours), theirs) if reverse
                else itertools.chain(theirs, ours))
        return itertools.islice(both, limit)

    def scan(self, start: int = 1, stop: int | None = None, *, reverse: bool = False,
             limit: int | None = None) -> Iterator[Record]:
        return self._merged(self._base.scan, lambda s: True, start, stop, reverse, limit)

    def scan_braid(self, braid_id: str, start: int = 1, stop: int | None = None, *,
                   reverse: bool = False, limit: int | None = None) -> Iterator[Record]:
        base = functools.partial(self._base.scan_braid, braid_id)
        return self._merged(base, lambda s: s.delta.braid_id == braid_id, start, stop, reverse, limit)

    def scan_kind(self, kind: str, start: int = 1, stop: int | None = None, *,
                  reverse: bool = False, limit: int | None = None) -> Iterator[Record]:
        base = functools.partial(self._base.scan_kind, kind)
        return self._merged(base, lambda s: s.delta.kind == kind, start, stop, reverse, limit)

    def scan_refs(self, entity_id: str, start: int = 1, stop: int | None = None, *,
                  reverse: bool = False, limit: int | None = None) -> Iterator[Record]:
        base = functools.partial(self._base.scan_refs, entity_id)
        return self._merged(base, lambda s: entity_id in s.refs, start, stop, reverse, limit)

    def braid_head(self, braid_id: str) -> BraidHead:
        base = self._base.braid_head(braid_id)
        ours = [s.seq for s in self._staged if s.delta.braid_id == braid_id]
        return BraidHead(base.version + len(ours), ours[-1]) if ours else base


class View:
    """A braid as of one seq: the log up to it and every projection's state there. Read-only."""

    def __init__(self, braid: Braid, seq: int) -> None:
        if not isinstance(braid, Braid):
            raise ValidationError("braid", f"must be a Braid, not {type(braid).__name__}")
        whole(seq, "seq")
        self.braid = braid
        self.seq = seq
        self.log = ReadView(braid.log, seq)
        self._cache: dict[str, Any] = {}

    def head(self) -> Head:
        return self.log.head()

    def close(self) -> None:
        """Forget the states this view computed (a view holds no store of its own: the braid's
        ``close`` releases that); closing it again does nothing."""
        self._cache.clear()

    def __enter__(self) -> View:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def state(self, name: str) -> Any:
        """The state of projection ``name`` after deltas 1..seq (computed once per view)."""
        if not isinstance(name, str):
            raise ValidationError("projection", f"must be a string, not {type(name).__name__}")
        if name not in self._cache:
            self._cache[name] = self.braid.state_at(name, self.seq)
        return self._cache[name]

    def states(self, names: Sequence[str] | None = None) -> dict[str, Any]:
        if names is not None and (isinstance(names, str) or not isinstance(names, Iterable)):
            raise ValidationError("names", f"must be a list of projection names, not {type(names).__name__}")
        return {n: self.state(n) for n in (names or self.braid.projections)}

    def recall(self, query: Any, k: int = 10, *, space: str = "default", metric: Literal["cosine", "ip"] = "cosine",
               **filters: Any) -> list[Any]:
        """Recall as of this view's seq: only deltas up to it are eligible."""
        from .recall import recall_at

        _space_and_metric(space, metric)
        return recall_at(self, query, k, space=space, metric=metric, **filters)
