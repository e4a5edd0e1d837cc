"""What an import checks of erasures: the erased records of an export and its ``erased`` deltas
must agree; records an ``erased`` delta names before the export's first seq are erased in the
target with the import. Pure."""

from __future__ import annotations

from ..delta import GenericDelta

__all__ = ["Erasures", "erased_line", "erasure_line"]


class Erasures:
    """What an import has read of erasures, to refuse an export whose erased records and
    ``erased`` deltas do not match: every record an ``erased`` delta of the export names within
    it must be erased by it, and every erased record whose erasure is in the export must be
    named by it. Records it names before the export's first seq are to be erased in the target
    (``before``: seq -> the seq of the ``erased`` delta)."""

    def __init__(self) -> None:
        self.erased: dict[int, int] = {}  # erased record in the export -> the seq that erased it
        self.named: dict[int, set[int]] = {}  # seq of an erased delta -> the seqs it names
        self.before: dict[int, int] = {}

    def unnamed(self, last: int) -> str | None:
        """Why the export is refused once read to seq ``last``: an erased record whose erasure
        is in the export but does not name it."""
        for s, by in sorted(self.erased.items()):
            if by <= last and s not in self.named.get(by, ()):
                return (f"seq {s} is shown erased by seq {by}, which is not an erased delta "
                        "naming it: the export was edited")
        return None


def erased_line(d: GenericDelta, seq: int, erasures: Erasures) -> str | None:
    """Why an erased record at ``seq`` of an export is refused, or None."""
    assert d.erased is not None  # the callers' deltas are erased ones
    if d.erased.by <= seq:
        return f"the record is erased by seq {d.erased.by}, which is not after it: it was edited"
    erasures.erased[seq] = d.erased.by
    return None


def erasure_line(d: GenericDelta, seq: int, erasures: Erasures, start: int) -> str | None:
    """Why the ``erased`` delta at ``seq`` of an export is refused, or None."""
    named = set(d.payload.get("seqs", ()))
    for s in sorted(named):
        if s >= seq:
            return f"the erased delta names seq {s}, which is not before it"
        if s >= start and erasures.erased.get(s) != seq:
            return (f"the erased delta at seq {seq} names seq {s}, which the export does not show "
                    f"erased by it: the export was edited, or made before the erasure")
        if s < start:
            erasures.before[s] = seq
    erasures.named[seq] = named
    return None
