"""Channel values in the log: where the saver stores a value whole and where as a byte delta
against an earlier version of the same channel, and how a value is read back.

A channel's stored versions form skip-delta chains (Subversion's): counting the versions stored
since the last whole one (``n``, 0 for the whole one), version ``n`` is a delta against version
``n & (n - 1)`` (``n`` with its lowest set bit cleared). So a value is rebuilt from at most
popcount(n) + 1 records (11 for the 1,000th version), each patch applied once, and a value that
grows by a little each step costs, over n versions, about n/2 * log2(n) increments on disk rather
than the n^2/2 of storing it whole each time. A delta that would not be much smaller than the
value (``bdiff``) stores it whole, and its chain starts again.

Values read or written are cached by (seq, channel) as serialized bytes (CACHE_BYTES), with
each stored version's place in its chain; both are facts of the log, never stale.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from ._encoding import b64, bdiff, bpatch, unb64

__all__ = ["Values", "CACHE_BYTES"]

CACHE_BYTES = 64 << 20
MAX_LINKS = 1 << 20


class _Cache:
    """Recently read or written channel values, by (seq, channel), as serialized bytes."""

    def __init__(self, budget: int) -> None:
        self.budget, self.size = budget, 0
        self.items: OrderedDict[tuple[int, str], tuple[str, bytes]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: tuple[int, str]) -> tuple[str, bytes] | None:
        with self.lock:
            hit = self.items.get(key)
            if hit is not None:
                self.items.move_to_end(key)
            return hit

    def put(self, key: tuple[int, str], value: tuple[str, bytes]) -> None:
        with self.lock:
            if key in self.items:
                return
            self.items[key] = value
            self.size += len(value[1])
            while self.size > self.budget and len(self.items) > 1:
                _, (_, old) = self.items.popitem(last=False)
                self.size -= len(old)


class Values:
    """The channel values of the records of ``log``: read (``bytes_at``) and encoded for a new
    record (``encode``)."""

    def __init__(self, log: Any) -> None:
        self.log = log
        self.reset()

    def reset(self) -> None:
        """Forget everything cached (after records were erased)."""
        self.cache = _Cache(CACHE_BYTES)
        #: (seq, channel) -> (n, seq of the base; 0 for a whole value) of a stored version
        self.links: dict[tuple[int, str], tuple[int, int]] = {}
        #: versions of a batch being built, at the seqs it will have if committed at once
        self._pending: dict[tuple[int, str], tuple[tuple[int, int], tuple[str, bytes]]] = {}

    def pending(self, seq: int, ch: str, enc: dict[str, Any], value: tuple[str, bytes]) -> None:
        """A version the batch being built stores at ``seq``: later versions of the batch may
        be deltas against it. ``settle()`` forgets it, committed or not."""
        self._pending[(seq, ch)] = ((enc.get("n", 0), enc.get("base", 0)), value)

    def settle(self) -> None:
        self._pending.clear()

    def _enc(self, seq: int, ch: str) -> dict[str, Any] | None:
        enc = self.log.read(seq).delta.payload.get("values", {}).get(ch)
        if enc is not None:
            self._link(seq, ch, enc)
        return enc

    def _link(self, seq: int, ch: str, enc: dict[str, Any]) -> None:
        if len(self.links) >= MAX_LINKS:
            self.links.clear()
        if "b" in enc:
            self.links[(seq, ch)] = (0, 0)
        elif "n" in enc:
            self.links[(seq, ch)] = (enc["n"], enc["base"])

    def link(self, seq: int, ch: str) -> tuple[int, int] | None:
        """(n, base seq) of the version of ``ch`` stored at ``seq``; None when it is not on a
        skip-delta chain (empty, erased, or a delta written before chains were)."""
        found = self.links.get((seq, ch))
        if found is None and (seq, ch) in self._pending:
            return self._pending[(seq, ch)][0]
        if found is None and self._enc(seq, ch) is not None:
            found = self.links.get((seq, ch))
        return found

    def bytes_at(self, seq: int, ch: str) -> tuple[str, bytes] | None:
        """The serialized value of channel ``ch`` stored by record ``seq`` (None: empty or
        erased), resolving its chain of byte deltas."""
        hit = self.cache.get((seq, ch))
        if hit is None and (seq, ch) in self._pending:
            hit = self._pending[(seq, ch)][1]
        if hit is not None:
            return hit
        chain: list[tuple[int, dict[str, Any]]] = []
        at = seq
        while True:
            enc = self._enc(at, ch)
            if enc is None or enc.get("t") == "empty":  # erased under a later version's delta: gone
                return None
            if "b" in enc:
                value = (enc["t"], unb64(enc["b"]))
                self.cache.put((at, ch), value)
                break
            chain.append((at, enc))
            at = enc["base"]
            hit = self.cache.get((at, ch))
            if hit is not None:
                value = hit
                break
        for s, enc in reversed(chain):
            value = (enc["t"], bpatch(value[1], enc["ops"]))
            self.cache.put((s, ch), value)
        return value

    def encode(self, ch: str, version: Any, t: str, data: bytes, last: int | None) -> dict[str, Any]:
        """The payload form of a new version of ``ch`` (serialized as ``t``, ``data``), the
        channel's last stored version being at seq ``last``: a delta against the version its
        skip-delta chain names where that is much smaller, else whole."""
        enc: dict[str, Any] = {"v": version, "t": t}
        base = None if last is None else self._base(ch, last)
        if base is not None:
            old = self.bytes_at(base[1], ch)
            ops = None if old is None else bdiff(old[1], data)
            if ops is not None:
                enc.update(base=base[1], n=base[0], ops=ops)
                return enc
        enc.update(b=b64(data), n=0)
        return enc

    def _base(self, ch: str, last: int) -> tuple[int, int] | None:
        """(n of the new version, seq of its base): the version ``n & (n - 1)`` of the chain
        of the version at ``last`` (it is on that chain: clearing the trailing ones of n - 1)."""
        found = self.link(last, ch)
        if found is None:
            return None
        n = found[0] + 1
        want = n & (n - 1)
        at, (k, base) = last, found
        while k > want:
            at = base
            step = self.link(at, ch)
            if step is None:
                return None
            k, base = step
        return (n, at) if k == want else None

    def written(self, seq: int, ch: str, enc: dict[str, Any], value: tuple[str, bytes]) -> None:
        """Remember a version just stored at ``seq``."""
        self._link(seq, ch, enc)
        self.cache.put((seq, ch), value)
