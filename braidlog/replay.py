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

import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec
from msgspec import Struct

from .chain import digest
from .errors import CheckpointWarning
from .projection import Projection
from .store import LogStore, Progress

__all__ = ["Checkpoint", "encode_state", "decode_state", "fold", "write_checkpoint",
           "load_checkpoint", "state_at", "stale_checkpoints"]


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


def fold(store: LogStore, projections: Sequence[Projection], states: list[Any], seqs: list[int],
         stop: int, *, progress: Progress | None = None) -> None:
    """Fold records up to ``stop`` (inclusive) into ``states`` in place; ``seqs[i]`` is where
    state i stands and is advanced."""
    start = min(seqs, default=stop) + 1
    if start > stop:
        return
    evolves = [p.evolve for p in projections]
    kinds = [p.kinds for p in projections]
    n = len(projections)
    if n == 1:  # the common case of time travel: one projection, no per-state bookkeeping
        evolve, k, state = evolves[0], kinds[0], states[0]
        for rec in store.scan(start, stop + 1):
            d = rec.delta
            if k is None or d.kind in k:
                state = evolve(state, d)
        states[0], seqs[0] = state, stop
        if progress is not None:
            progress(stop - start + 1)
        return
    readers: dict[str, list[int]] = {}  # kind -> the projections that read it, found once per kind
    done = 0
    for rec in store.scan(start, stop + 1):
        seq, d = rec.seq, rec.delta
        who = readers.get(d.kind)
        if who is None:
            who = readers[d.kind] = [i for i in range(n) if kinds[i] is None or d.kind in kinds[i]]
        for i in who:
            if seqs[i] < seq:
                states[i] = evolves[i](states[i], d)
        done += 1
        if progress is not None and not done & 0x3FFF:
            progress(done)
    for i in range(n):
        seqs[i] = max(seqs[i], stop)
    if progress is not None:
        progress(done)


def write_checkpoint(store: LogStore, projection: Projection, seq: int, state: Any) -> None:
    """Store ``state`` as the checkpoint of ``projection`` at ``seq`` (unless that very blob is
    there already; a damaged one is replaced)."""
    blob = _ckpt_encoder.encode(Checkpoint.make(seq, store.hash_at(seq), encode_state(state)))
    if store.get_checkpoint(projection.name, projection.version, seq) != blob:
        store.put_checkpoint(projection.name, projection.version, seq, blob)


def load_checkpoint(store: LogStore, projection: Projection, at_most: int,
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


def stale_checkpoints(store: LogStore, projections: Iterable[Projection]) -> list[str]:
    """Messages for checkpoints kept under another version of a projection (ignored)."""
    current = {p.name: p.version for p in projections}
    seen: dict[tuple[str, int], int] = {}
    for name, version, _ in store.checkpoint_keys():
        if name in current and version != current[name]:
            seen[(name, version)] = seen.get((name, version), 0) + 1
    return [f"{count} checkpoint(s) of {name} v{version} ignored: the projection is now "
            f"v{current[name]}; its state is rebuilt from the log"
            for (name, version), count in sorted(seen.items())]


def state_at(store: LogStore, projection: Projection, seq: int,
             *, warn: Callable[[str], None] | None = None) -> Any:
    """The state of ``projection`` after deltas ``1..seq``: nearest checkpoint, then fold."""
    found = load_checkpoint(store, projection, seq, warn=warn)
    base, state = found if found is not None else (0, projection.start())
    states, seqs = [state], [base]
    fold(store, [projection], states, seqs, seq)
    return states[0]


def _warn(message: str) -> None:
    warnings.warn(message, CheckpointWarning, stacklevel=3)


