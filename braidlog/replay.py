"""Folding projections over the log: catch-up, checkpoints and time travel.

A checkpoint is a projection's state at a seq, stored in the log's store under
(projection name, projection version, seq) as a ``Checkpoint``: the state's msgspec bytes, the
chain hash of the log at that seq, and a blake3 digest over both. A checkpoint is used only when
its digest matches its content, its chain hash matches the log, and its version is the
projection's current version; otherwise it is ignored (with a ``CheckpointWarning`` saying why)
and the state is rebuilt from the log. Because a checkpoint equals a fresh fold of deltas
``1..seq``, resuming from it and folding the rest gives the same state as folding everything.
"""

from __future__ import annotations

import gc
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import msgspec
from msgspec import Struct

from .chain import digest
from .delta import Erasure
from .errors import CheckpointWarning, DecodeError, IntegrityError
from .projection import REF_FIELDS, Projection
from .store import HW_SIZE, FullStore, Progress

__all__ = ["Checkpoint", "encode_state", "decode_state", "fold", "write_checkpoint",
           "write_encoded_checkpoint", "load_checkpoint", "state_at", "stale_checkpoints",
           "fold_step", "check_step", "CheckpointCheck", "check_checkpoints"]


class Checkpoint(Struct, frozen=True):
    """A projection's state at ``seq``, with the chain hash it covers and a digest of itself."""

    seq: int
    chain: bytes
    state: bytes
    digest: bytes

    @staticmethod
    def make(seq: int, chain: bytes, state: bytes) -> Checkpoint:
        return Checkpoint(seq, chain, state, _digest(seq, chain, state))

    def intact(self) -> bool:
        return self.digest == _digest(self.seq, self.chain, self.state)


def _digest(seq: int, chain: bytes, state: bytes) -> bytes:
    return digest(seq.to_bytes(8, "big") + chain + state)


_ckpt_encoder = msgspec.msgpack.Encoder()
_ckpt_decoder = msgspec.msgpack.Decoder(Checkpoint)
_state_encoder = msgspec.msgpack.Encoder(order="deterministic")


def encode_state(state: Any) -> bytes:
    """A projection state's canonical bytes (deterministic key order)."""
    return _state_encoder.encode(state)


def decode_state(projection: Projection, data: bytes) -> Any:
    """A projection state from its bytes, typed as ``projection.state_type``."""
    return msgspec.msgpack.decode(data, type=projection.state_type)


def fold(store: FullStore, projections: Sequence[Projection], states: list[Any], seqs: list[int],
         stop: int, *, progress: Progress | None = None) -> None:
    """Fold records up to ``stop`` (inclusive) into ``states`` in place; ``seqs[i]`` is where
    state i stands and is advanced.

    Each state sees each delta after its seq exactly once, and only the deltas its projection
    reads (``Projection.reads``). States that stand at different seqs are folded in parts cut
    at those seqs: every part folds the states that already stand at its start.
    """
    start = min(seqs, default=stop) + 1
    if start > stop:
        return
    with collector_paused():
        _fold(store, projections, states, seqs, stop, progress)


_pause_lock = threading.Lock()
_pauses = 0
_resume = False


class _CollectorPaused:
    """``collector_paused()``: a context manager object rather than a generator's, since the
    boundary enters one for every write (a few microseconds less for a single append)."""

    __slots__ = ()

    def __enter__(self) -> None:
        global _pauses, _resume
        with _pause_lock:
            if _pauses == 0:
                _resume = gc.isenabled()
                gc.disable()
            _pauses += 1

    def __exit__(self, *exc: object) -> None:
        global _pauses
        with _pause_lock:
            _pauses -= 1
            if _pauses == 0 and _resume:
                gc.enable()


_COLLECTOR_PAUSED = _CollectorPaused()


def collector_paused() -> _CollectorPaused:
    """Python's cyclic garbage collector off while a fold runs, as it was before afterwards.

    A fold allocates a state object or two per delta and keeps most of them, so the collector's
    passes over the growing heap made replay slower per delta the longer the log (at 1,000,000
    deltas, a third of the time; docs/benchmarks.md). Folds make next to no cyclic garbage
    (evolve is pure), and what they make is collected once the collector runs again. Nested and
    concurrent folds share one pause: the first turns the collector off, the last back on."""
    return _COLLECTOR_PAUSED


def _fold(store: FullStore, projections: Sequence[Projection], states: list[Any], seqs: list[int],
          stop: int, progress: Progress | None) -> None:
    cuts = sorted({s for s in seqs if s < stop})
    done = 0
    for k, at in enumerate(cuts):
        until = cuts[k + 1] if k + 1 < len(cuts) else stop
        active = [i for i, s in enumerate(seqs) if s <= at]
        tick = None if progress is None else (lambda n, base=done: progress(base + n))
        if len(active) == 1:
            i = active[0]
            states[i] = _fold_one(store, projections[i], states[i], at + 1, until, tick)
        else:
            _fold_many(store, projections, states, active, at + 1, until, tick)
        done += until - at
    for i in range(len(seqs)):
        seqs[i] = max(seqs[i], stop)
    if progress is not None:
        progress(done)


_EVERY = 0x4000  # how often (in deltas) a fold reports progress


def _fold_one(store: FullStore, p: Projection, state: Any, start: int, stop: int,
              tick: Progress | None) -> Any:
    """One projection over seqs ``start..stop`` (the common case of time travel): its own
    ``Projection.fold`` over the records' deltas."""
    deltas: Iterable[Any] = (_viewed(store, p.view, start, stop) if p.view is not None
                             else (rec.delta for rec in store.scan(start, stop + 1)))
    if tick is not None:
        deltas = _ticking(deltas, tick)
    return p.fold(deltas, state, seq=start - 1)


_view_decoders: dict[type, Any] = {}


def _viewed(store: FullStore, view: type, start: int, stop: int) -> Iterator[Any]:
    """The records ``start..stop`` decoded into ``view`` (``Projection.view``): only its fields."""
    decode = _view_decoders.get(view)
    if decode is None:
        decode = _view_decoders[view] = msgspec.msgpack.Decoder(_marked(view)).decode
    for seq, _, body in store.scan_bodies(start, stop + 1):
        try:
            yield decode(body[HW_SIZE:])
        except msgspec.MsgspecError as e:
            raise DecodeError(f"the record at seq {seq} is not a delta ({e})") from None


def _marked(view: type[Struct]) -> type[Struct]:
    """``view`` with GenericDelta's ``erased`` field, so the fold can tell an erased record."""
    if "erased" in view.__struct_fields__:
        return view
    return type(view.__name__, (view,), {"__annotations__": {"erased": Erasure | None},
                                         "erased": None, "__module__": view.__module__})


def _ticking(items: Iterable[Any], tick: Progress) -> Iterator[Any]:
    """``items``, reporting how many have passed every ``_EVERY``."""
    for n, item in enumerate(items, 1):
        yield item
        if not n % _EVERY:
            tick(n)


def _fold_many(store: FullStore, projections: Sequence[Projection], states: list[Any],
               active: list[int], start: int, stop: int, tick: Progress | None) -> None:
    """The ``active`` states over seqs ``start..stop``, each delta through the step of its kind
    (``fold_step``, made on the kind's first delta): the projections that read every delta of the
    kind, and those that may read one by its refs or provenance (tested per delta)."""
    by_provenance = frozenset().union(*(projections[i].provenances for i in active))
    steps: dict[str, Callable[[Any, int, list[Any]], None]] = {}
    records: Iterable[Any] = store.scan(start, stop + 1)
    if tick is not None:
        records = _ticking(records, tick)
    for rec in records:
        d = rec.delta
        if d.erased is None:
            step = steps.get(d.kind)
            if step is None:
                step = steps[d.kind] = fold_step(d.kind, projections, active, by_provenance)
            step(d, rec.seq, states)
        else:  # each projection that reads it folds it its own way
            for i in active:
                if projections[i].reads(d):
                    states[i] = projections[i].apply(states[i], d, rec.seq)


def fold_step(kind: str, projections: Sequence[Projection], active: list[int],
              by_provenance: frozenset[str]) -> Callable[[Any, int, list[Any]], None]:
    """``step(delta, seq, states)`` for the deltas of ``kind``: one straight run of evolve calls,
    first of the projections that read every delta of the kind, then, tested per delta, of those
    that may read one by its refs or provenance; each in ``active`` order, each in its own form
    (``positional``). Written out as code, as dataclasses writes ``__init__``: a replay calls it
    once per delta, and a loop over a table of (state, evolve, form) costs more than the calls.
    The boundary folds a batch being written through it too (``Braid``)."""
    names: dict[str, Any] = {"by_provenance": by_provenance}
    lines = ["def step(d, seq, S):"]

    def call(i: int, indent: str) -> str:
        p = projections[i]
        names[f"f{i}"] = p.evolve
        return f"{indent}S[{i}] = f{i}(S[{i}], d{', seq' if p.positional else ''})"

    maybe = []
    for i in active:
        p = projections[i]
        if p.kinds is None or kind in p.kinds:
            lines.append(call(i, "    "))
        elif p.refs or p.provenances:
            maybe.append(i)
    if maybe:
        lines += ["    refs, source = d.refs, d.provenance.kind",
                  "    if refs is not None or source in by_provenance:"]
        for i in maybe:
            lines += [f"        if {_reads_by(projections[i], i, names)}:", call(i, "            ")]
    if len(lines) == 1:
        lines.append("    pass")
    exec("\n".join(lines), names)  # generated code; names: evolves and sets; fields: REF_FIELDS
    return names["step"]


def check_step(kind: str, projections: Sequence[Projection]
               ) -> Callable[[Any, list[Any], Any], None] | None:
    """``check(delta, states, at)`` for the deltas of ``kind``: the ``check`` of each projection
    that reads the delta (``Projection.reads``), in the projections' order, so the first rule
    broken is the one named; None when no projection with a check reads a delta of ``kind``.
    Written out as code, as ``fold_step``, for the boundary's loop over a batch."""
    names: dict[str, Any] = {}
    lines, tested = [], False
    for i, p in enumerate(projections):
        if p.check is None:
            continue
        names[f"c{i}"] = p.check
        if p.kinds is None or kind in p.kinds:
            lines.append(f"    c{i}(S[{i}], d, at)")
        elif p.refs or p.provenances:
            lines += [f"    if {_reads_by(p, i, names)}:", f"        c{i}(S[{i}], d, at)"]
            tested = True
    if not lines:
        return None
    head = ["def check(d, S, at):"] + (["    refs, source = d.refs, d.provenance.kind"] if tested else [])
    exec("\n".join(head + lines), names)  # generated code; names: checks and sets; fields: REF_FIELDS
    return names["check"]


def _reads_by(p: Projection, i: int, names: dict[str, Any]) -> str:
    """The test, as code over ``refs`` and ``source``, of whether projection ``p`` (number
    ``i``) reads a delta of a kind it does not read whole: by its provenance or by its refs."""
    tests = []
    if p.provenances:
        names[f"p{i}"] = p.provenances
        tests.append(f"source in p{i}")
    if p.refs:  # Projection admits REF_FIELDS only; code is written from that tuple alone
        fields = [f for f in REF_FIELDS if f in p.refs]
        tests.append(f"(refs is not None and ({' or '.join(f'refs.{f}' for f in fields)}))")
    return " or ".join(tests)


def write_checkpoint(store: FullStore, projection: Projection, seq: int, state: Any) -> None:
    """Store ``state`` as the checkpoint of ``projection`` at ``seq`` (unless that very blob is
    there already; a damaged one is replaced)."""
    write_encoded_checkpoint(store, projection, seq, encode_state(state))


def write_encoded_checkpoint(store: FullStore, projection: Projection, seq: int, data: bytes) -> None:
    """``write_checkpoint`` of a state already encoded (``encode_state``), e.g. taken while its
    deltas were being written and stored once they are committed."""
    blob = _ckpt_encoder.encode(Checkpoint.make(seq, store.hash_at(seq), data))
    if store.get_checkpoint(projection.name, projection.version, seq) != blob:
        store.put_checkpoint(projection.name, projection.version, seq, blob)


def load_checkpoint(store: FullStore, projection: Projection, at_most: int,
                    *, warn: Callable[[str], None] | None = None) -> tuple[int, Any] | None:
    """The newest valid checkpoint of ``projection`` at or before seq ``at_most``, decoded.

    Invalid ones are skipped, each reported through ``warn`` (default: a CheckpointWarning).
    """
    warn = warn or _warn
    head = store.head().seq
    for seq in reversed(store.checkpoint_seqs(projection.name, projection.version)):
        if seq > at_most:
            continue
        why = None
        raw = store.get_checkpoint(projection.name, projection.version, seq)
        try:
            ckpt = _ckpt_decoder.decode(raw) if raw is not None else None
        except msgspec.DecodeError:
            ckpt = None
        if ckpt is None or ckpt.seq != seq or not ckpt.intact():
            why = "its content does not match its hash"
        elif seq > head:
            why = f"it covers seq {seq} but the log ends at {head}"
        elif ckpt.chain != store.hash_at(seq):
            why = "the chain hash it covers differs from the log's"
        else:
            try:
                return seq, decode_state(projection, ckpt.state)
            except msgspec.MsgspecError as e:
                why = f"its state does not decode as {projection.state_type!r} ({e})"
        warn(f"checkpoint {projection.name} v{projection.version} at seq {seq} ignored: {why}; "
             "rebuilding from the log")
    return None


def stale_checkpoints(store: FullStore, projections: Iterable[Projection]) -> list[str]:
    """Messages for checkpoints kept under another version of a projection (ignored)."""
    current = {p.name: p.version for p in projections}
    seen: dict[tuple[str, int], int] = {}
    for name, version, _ in store.checkpoint_keys():
        if name in current and version != current[name]:
            seen[(name, version)] = seen.get((name, version), 0) + 1
    return [f"{count} checkpoint(s) of {name} v{version} ignored: the projection is now "
            f"v{current[name]}; its state is rebuilt from the log"
            for (name, version), count in sorted(seen.items())]


def state_at(store: FullStore, projection: Projection, seq: int,
             *, warn: Callable[[str], None] | None = None) -> Any:
    """The state of ``projection`` after deltas ``1..seq``: nearest checkpoint, then fold."""
    found = load_checkpoint(store, projection, seq, warn=warn)
    base, state = found if found is not None else (0, projection.start())
    states, seqs = [state], [base]
    fold(store, [projection], states, seqs, seq)
    return states[0]


def _warn(message: str) -> None:
    warnings.warn(message, CheckpointWarning, stacklevel=3)


# -- checking the checkpoints a store holds -----------------------------------------------------

class CheckpointCheck(Struct, frozen=True):
    """One checkpoint checked: ``status`` ok, or why its state was not decoded."""

    name: str
    version: int
    seq: int
    status: str


def check_checkpoints(store: FullStore, projections: Iterable[Projection] | None = None
                      ) -> list[CheckpointCheck]:
    """Check every checkpoint: its blob decodes, its digest matches its content, it covers a seq
    of the log with the log's chain hash there, and (for a loaded projection at that version) its
    state decodes. The first damaged one raises IntegrityError naming it."""
    known = {p.name: p for p in (projections or ())}
    head = store.head().seq
    decoder = msgspec.msgpack.Decoder(Checkpoint)
    out = []
    for name, version, seq in store.checkpoint_keys():
        label = f"checkpoint {name} v{version} at seq {seq}"
        raw = store.get_checkpoint(name, version, seq)
        try:
            ckpt = decoder.decode(raw or b"")
        except msgspec.MsgspecError:
            raise IntegrityError(f"{label} does not decode as a checkpoint", seq=seq) from None
        if ckpt.seq != seq or not ckpt.intact():
            raise IntegrityError(f"{label}: its content does not match its digest", seq=seq)
        if seq > head:
            raise IntegrityError(f"{label} covers seq {seq} but the log ends at {head}", seq=seq)
        chain = store.hash_at(seq)
        if ckpt.chain != chain:
            raise IntegrityError(f"{label}: it covers chain hash {ckpt.chain.hex()}, the log has "
                                 f"{chain.hex()}", seq=seq, expected=chain, found=ckpt.chain)
        p = known.get(name)
        if p is None:
            status = "ok (state not decoded: projection not loaded)"
        elif p.version != version:
            status = f"ok (stale: the projection is now v{p.version}; ignored on open)"
        else:
            try:
                decode_state(p, ckpt.state)
            except msgspec.MsgspecError as e:
                raise IntegrityError(f"{label}: its state does not decode ({e})", seq=seq) from None
            status = "ok"
        out.append(CheckpointCheck(name, version, seq, status))
    return out
