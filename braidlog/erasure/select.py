"""What an erase request selects, and the report of what an erasure did. Pure: it reads a
store through the LogStore port and writes nothing."""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any

from msgspec import Struct

from ..errors import ValidationError
from ..kind_schema import KIND_DECLARED
from .records import ERASED, ERASURES_BRAID

__all__ = ["ErasureReport", "Selection", "select"]


class ErasureReport(Struct, frozen=True):
    """What ``Braid.erase`` did: the seqs erased with their commitments, those skipped (erased
    already), the seq of the ``erased`` delta, the reason's hash and what selected them."""

    seqs: tuple[int, ...]
    erased: tuple[tuple[int, bytes], ...]  # (seq, commitment)
    skipped: tuple[int, ...]
    seq: int
    reason_sha256: str
    what: str


class Selection(Struct, frozen=True):
    """What an erase request selects: the seqs to erase (sorted), those it passed over because
    they were erased already, and what selected them (for messages)."""

    seqs: tuple[int, ...]
    skipped: tuple[int, ...]
    what: str


def _seq_list(seqs: Any) -> list[int]:
    if isinstance(seqs, (str, bytes)) or not isinstance(seqs, Iterable):
        seqs = [seqs]
    out = []
    for s in seqs:
        if isinstance(s, bool) or not isinstance(s, numbers.Integral):
            raise ValidationError("seq", f"must be whole numbers, not {type(s).__name__}")
        out.append(int(s))
    return out


def select(store: Any, *, braid: str | None = None, refers: str | None = None,
           seqs: Any = None) -> Selection:
    """The seqs a request names: every delta of ``braid``, every delta that refers to
    ``refers`` (the refers-to index), the ``seqs`` given; several selectors add up. Refused
    (ValidationError naming the field) when a selector names nothing in the log, when a seq
    given is erased already or is an ``erased`` or kind-declaring delta, and when nothing is
    left to erase. Deltas a braid or an entity selects that are erased already are skipped."""
    if braid is None and refers is None and seqs is None:
        raise ValidationError("selection", "name what to erase: a braid, an entity (refers) or seqs")
    head = store.head().seq
    chosen: dict[int, Any] = {}
    named: set[int] = set()
    what = []
    if seqs is not None:
        given = _seq_list(seqs)
        if not given:
            raise ValidationError("seq", "names no seq")
        for s in given:
            if not 1 <= s <= head:
                raise ValidationError("seq", f"seq {s} is not in the log (1..{head})")
            chosen[s] = store.read(s).delta
            named.add(s)
        what.append("seq " + ", ".join(map(str, sorted(named))))
    for field, value, scan in (("braid", braid, store.scan_braid), ("refers", refers, store.scan_refs)):
        if value is None:
            continue
        if not isinstance(value, str) or not value:
            raise ValidationError(field, f"must be a non-empty string, not {value!r}")
        found = {r.seq: r.delta for r in scan(value)}
        if not found:
            erased = store.braid_head(ERASURES_BRAID).version > 0
            raise ValidationError(field, f"no braid {value!r} in the log" if field == "braid"
                                  else f"no delta refers to {value!r} in the log" + (
                                      " (an erased delta keeps only the references of its "
                                      "envelope: erased already?)" if erased else ""))
        chosen.update(found)
        what.append(f"{field} {value}")
    todo, skipped = [], []
    for s, d in sorted(chosen.items()):
        if d.kind in (ERASED, KIND_DECLARED):
            if s in named:
                raise ValidationError("seq", f"seq {s} is an {d.kind!r} delta, which cannot be "
                                      "erased (it holds no personal data, and the log needs it)")
            continue
        if getattr(d, "erased", None) is not None:
            if s in named:
                raise ValidationError("seq", f"seq {s} is already erased (by seq {d.erased.by})")
            skipped.append(s)
            continue
        todo.append(s)
    if not todo:
        raise ValidationError("selection", f"nothing to erase for {' and '.join(what)}: "
                              + (f"its {len(skipped)} delta(s) are erased already"
                                 if skipped else "it selects only erasure and kind deltas"))
    return Selection(tuple(todo), tuple(skipped), " and ".join(what))


