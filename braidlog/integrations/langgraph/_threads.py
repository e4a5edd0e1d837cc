"""Where a thread's checkpoints, channel values and writes are in the log: an index each process
keeps in memory and brings up to date from the thread's braid before every read, so what
another process appended is seen at once. It holds seqs, not values: values are read from the
records when asked for.

Visibility follows the tombstones (``langgraph.deleted``) in seq order: deleting a thread hides
every checkpoint it held then, pruning hides all but the ones it keeps, and deleting runs hides
the checkpoints those runs wrote. A checkpoint put again later is visible again (without the
writes it had before).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ThreadIndex", "RunDeletions", "THREAD_PREFIX", "RUNS_BRAID"]

THREAD_PREFIX = "langgraph/thread/"
RUNS_BRAID = "langgraph/runs"

Key = tuple[str, str]  # (checkpoint_ns, checkpoint_id)


@dataclass
class Checkpoint:
    seq: int
    parent_id: str | None
    run_id: str | None
    hidden: bool = False
    writes: list[int] = field(default_factory=list)  # seqs of langgraph.writes records
    write_keys: set[tuple[str, int]] = field(default_factory=set)  # (task_id, idx) stored


@dataclass
class ThreadIndex:
    """One thread's index: built from ``scan_braid(braid, start=seen + 1)``."""

    braid: str
    thread_id: str | None = None
    seen: int = 0
    checkpoints: dict[Key, Checkpoint] = field(default_factory=dict)
    #: (ns, channel, version) -> (seq of the record holding it, delta depth)
    blobs: dict[tuple[str, str, Any], tuple[int, int]] = field(default_factory=dict)
    #: (ns, channel) -> (seq, delta depth, bytes of deltas since stored whole) of the channel's
    #: latest stored version: the base of the next
    last: dict[tuple[str, str], tuple[int, int, int]] = field(default_factory=dict)

    def catch_up(self, log: Any) -> None:
        for rec in log.scan_braid(self.braid, start=self.seen + 1):
            if rec.delta.erased is None:  # an erased record is passed over (docs/forgetting.md)
                self.take(rec.seq, rec.delta.kind, rec.delta.payload)
            self.seen = rec.seq

    def take(self, seq: int, kind: str, p: dict[str, Any]) -> None:
        if not p:  # an erased record keeps its envelope only: nothing of it is read
            return
        if kind == "langgraph.checkpoint":
            ns, cid = p["ns"], p["checkpoint_id"]
            self.thread_id = p["thread_id"]
            old = self.checkpoints.get((ns, cid))
            cp = Checkpoint(seq, p.get("parent_id"), p.get("run_id"))
            if old is not None and not old.hidden:  # put again: the writes stay with it
                cp.writes, cp.write_keys = old.writes, old.write_keys
            self.checkpoints[(ns, cid)] = cp
            for ch, enc in p["values"].items():
                depth = enc.get("d", 0)
                self.blobs[(ns, ch, _key(enc["v"]))] = (seq, depth)
                if enc.get("t") != "empty":
                    self.last[(ns, ch)] = (seq, depth, enc.get("c", 0))
        elif kind == "langgraph.writes":
            put = self.checkpoints.get((p["ns"], p["checkpoint_id"]))
            if put is None:  # writes for a checkpoint not put (yet): kept for when it is
                put = self.checkpoints.setdefault((p["ns"], p["checkpoint_id"]),
                                                  Checkpoint(0, None, None))
            put.writes.append(seq)
            put.write_keys.update((p["task_id"], w[0]) for w in p["writes"])
        elif kind == "langgraph.deleted":
            keep = {tuple(k) for k in p.get("keep", ())} if p["what"] == "prune" else set()
            for key, cp in self.checkpoints.items():
                if key not in keep and not cp.hidden:
                    cp.hidden = True
                    cp.writes, cp.write_keys = [], set()

    def visible(self, runs: RunDeletions, ns: str | None = None) -> Iterator[tuple[Key, Checkpoint]]:
        for key, cp in self.checkpoints.items():
            if cp.seq and not cp.hidden and (ns is None or key[0] == ns) and not runs.hides(cp):
                yield key, cp

    def get(self, runs: RunDeletions, ns: str, cid: str) -> Checkpoint | None:
        cp = self.checkpoints.get((ns, cid))
        if cp is None or not cp.seq or cp.hidden or runs.hides(cp):
            return None
        return cp

    def latest(self, runs: RunDeletions, ns: str) -> tuple[str, Checkpoint] | None:
        best = None
        for (_, cid), cp in self.visible(runs, ns):
            if best is None or cid > best[0]:
                best = (cid, cp)
        return best


@dataclass
class RunDeletions:
    """The runs ``delete_for_runs`` deleted, each with the seq of its deletion: a checkpoint of
    such a run written before that seq is hidden."""

    seen: int = 0
    runs: dict[str, int] = field(default_factory=dict)

    def catch_up(self, log: Any) -> None:
        for rec in log.scan_braid(RUNS_BRAID, start=self.seen + 1):
            for run in rec.delta.payload.get("run_ids", ()):
                self.runs[run] = rec.seq
            self.seen = rec.seq

    def hides(self, cp: Checkpoint) -> bool:
        return self.hides_run(cp.run_id, cp.seq)

    def hides_run(self, run_id: str | None, seq: int) -> bool:
        """Whether a checkpoint of run ``run_id`` written at ``seq`` is hidden."""
        if not self.runs or run_id is None:
            return False
        at = self.runs.get(run_id)
        return at is not None and seq < at


def _key(version: Any) -> Any:
    """A channel version as a dict key: a list (from JSON) is not hashable, a version never is one."""
    return tuple(version) if isinstance(version, list) else version
