"""The shell's tables of deltas, laid out for the width they are printed at.

A table keeps what a reader scans for whole: the seq, the kind and the start of the payload,
at 80 columns as at 200, and through a pipe (which has no width: ``$COLUMNS`` if set, else 120).
Room is made in this order: the payload is given up to 40 columns first; the braid id is
shortened in its middle (``agentm…0d11``, both ends kept: a prefix names the application, a
suffix tells two apart), then the time drops its year, then the provenance is cut, then the
payload shrinks (to 12 at least); at widths narrower still the provenance, the confidence, the
time and the braid are left out, in that order. The payload then takes what is left.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import IO, Any, Literal

__all__ = ["width", "Column", "print_table", "shorten"]

#: The width a table is laid out for when the output is not a terminal and $COLUMNS is unset.
PIPE_WIDTH = 120
#: The fewest columns a payload (or any free text column) is given.
MIN_TEXT = 12
#: What a payload is given before anything else gives way to it.
PREFERRED_TEXT = 40
#: The fewest characters a braid id is shortened to.
MIN_BRAID = 9


def width() -> int:
    """The columns to lay a table out for: ``$COLUMNS``, else the terminal's, else 120."""
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return shutil.get_terminal_size((PIPE_WIDTH, 24)).columns


def shorten(text: str, room: int) -> str:
    """``text`` in at most ``room`` characters, cut in the middle (``abcdef…wxyz``)."""
    if len(text) <= room:
        return text
    if room <= 1:
        return "…"[:room]
    head = (room - 1 + 1) // 2
    tail = room - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


@dataclass
class Column:
    """A column: its header, how it is justified, and how it gives way when room is short:
    ``keep`` never shrinks (seq, kind, confidence), ``middle`` is shortened in the middle
    (braid ids) down to ``least``, ``end`` is cut at its end and ``front`` at its start (a
    time loses its year) down to ``least``, ``text`` takes what is left (the payload)."""

    header: str
    justify: Literal["left", "center", "right"] = "left"
    give: str = "keep"  # keep | middle | end | front | text
    least: int = 1
    order: int = 0      # which shrinkable column gives way first (lowest first)
    drop: int = 0       # when nothing else gives way, which column is left out first (0: never)


def _widths(columns: Sequence[Column], rows: Sequence[Sequence[str]], total: int) -> list[int]:
    """Each column's width (0: dropped) so that the table fits ``total``."""
    natural = [max([len(c.header), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    widths = list(natural)
    shown = list(range(len(columns)))

    def over() -> int:
        return sum(widths[i] for i in shown) + 2 * (len(shown) - 1) - total

    text = [i for i, c in enumerate(columns) if c.give == "text"]
    for i in text:
        widths[i] = min(natural[i], PREFERRED_TEXT)
    for _, i in sorted((c.order, i) for i, c in enumerate(columns) if c.give in ("middle", "end", "front")):
        if over() > 0:
            widths[i] = max(columns[i].least, len(columns[i].header), widths[i] - over())
    for i in text:
        if over() > 0:
            widths[i] = max(min(natural[i], MIN_TEXT), widths[i] - over())
    for _, i in sorted((c.drop, i) for i, c in enumerate(columns) if c.drop):
        if over() > 0:
            shown.remove(i)
            widths[i] = 0
    for i in text:  # the payload takes what is left, up to its natural width
        widths[i] += max(0, min(-over(), natural[i] - widths[i]))
    return widths


def print_table(out: IO[str], columns: Sequence[Column], rows: Iterable[Sequence[str]], *,
                title: str | None = None, empty: str = "nothing to show") -> int:
    """Print ``rows`` under ``columns`` laid out for ``width()``; the number of rows printed."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    grid = [list(r) for r in rows]
    total = max(40, width())
    con = Console(file=out, soft_wrap=False, width=total, markup=False, emoji=False, highlight=False)
    if not grid:
        con.print(empty)
        return 0
    widths = _widths(columns, grid, total)
    columns = [c for c, w in zip(columns, widths, strict=True) if w]
    grid = [[v for v, w in zip(r, widths, strict=True) if w] for r in grid]
    widths = [w for w in widths if w]
    for r in grid:
        for i, c in enumerate(columns):
            if c.give == "middle":
                r[i] = shorten(r[i], widths[i])
            elif c.give == "front":
                r[i] = r[i][-widths[i]:]
            elif len(r[i]) > widths[i]:
                r[i] = r[i][: max(widths[i] - 1, 0)] + "…"
    table = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True,
                  title_justify="left")
    for c, w in zip(columns, widths, strict=True):
        table.add_column(c.header, justify=c.justify, no_wrap=True, width=w, min_width=w,
                         overflow="ellipsis")
    for r in grid:
        table.add_row(*r)
    con.print(table)
    return len(grid)


def record_columns(payload: str = "payload") -> list[Column]:
    """The columns of a table of deltas (``braidlog log``, ``demo``, ``history``)."""
    return [Column("seq", "right"), Column("ts", give="front", least=14, order=1, drop=3),
            Column("braid", give="middle", least=MIN_BRAID, order=0, drop=4), Column("kind"),
            Column("prov", give="end", least=4, order=2, drop=1), Column("conf", "right", drop=2),
            Column(payload, give="text")]


def record_row(seq: int, d: Any, text: str) -> list[str]:
    """One delta as a row of ``record_columns``."""
    return [str(seq), d.ts.strftime("%Y-%m-%d %H:%M:%S"), d.braid_id, d.kind, d.provenance.kind,
            f"{d.confidence:.2f}", text]
