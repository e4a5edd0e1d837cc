"""What the command groups share: opening the store, points, JSON output, progress bars."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any

import msgspec

from ..braid import Braid, Point
from ..braid import open as open_braid
from ..errors import StorageError, ValidationError
from ..lmdb.log import LmdbLog
from ..store import Record

if TYPE_CHECKING:
    from rich.console import Console

_json = msgspec.json.Encoder(order="deterministic")


def store_path(args: Any) -> str:
    return os.fspath(args.store)


def open_store(args: Any, *, readonly: bool = True, check_head: bool = True) -> LmdbLog:
    """The store named by ``--store``; it must exist."""
    path = store_path(args)
    if not os.path.exists(os.path.join(path, "data.mdb")):
        raise StorageError(f"no store at {path}", hint="run `braidlog init` or `braidlog demo` first, "
                           "or pass --store PATH")
    return LmdbLog(path, create=False, readonly=readonly, check_head=check_head)


def refuse_on_replica(args: Any, what: str) -> None:
    """Refuse a write to a store that is a replica never promoted (replication/role.py)."""
    from ..replication.role import refuse_writes

    refuse_writes(store_path(args), what)


def load_kinds(args: Any) -> None:
    """Declare the kinds of every installed package and of ``--app`` (or $BRAIDLOG_APP)."""
    from ..apps import load_kinds as load

    load(getattr(args, "app", None))


def open_for_state(args: Any, *, readonly: bool = False, lazy: bool = False) -> Braid:
    """The store with the projections it is used with live (caught up on first use if
    ``lazy``): those installed or named by ``--app`` that the store records. A recorded
    projection that cannot be found is named on stderr."""
    from ..apps import APP_ENV, app_projections, discover, for_store

    with open_store(args) as store:
        used = store.projections_used()
    apps = getattr(args, "app", None)
    projections, missing = for_store(discover(apps), used)
    if used:  # an application named now joins a store first used without it
        have = {p.name for p in projections}
        projections += [p for p in app_projections(apps) if p.name not in have]
    if missing:
        sys.stderr.write(f"braidlog: note: the store is used with {', '.join(map(repr, missing))}, "
                         f"not found here; name the application with --app MODULE or {APP_ENV}\n")
    return open_braid(store_path(args), projections=projections, create=False, readonly=readonly,
                      lazy=lazy)


def holds_nothing(projection: Any, state: Any, log: Any = None, seq: int | None = None) -> bool:
    """Whether ``state`` holds nothing to show: the projection's initial state, or, for a
    projection that owns kinds (its name is their owner in the registry), no delta of those
    kinds up to ``seq`` in ``log`` (what it keeps of other deltas, such as the time it last saw
    a message, is bookkeeping)."""
    if msgspec.msgpack.encode(state) == msgspec.msgpack.encode(projection.start()):
        return True
    if log is None or seq is None:
        return False
    owned = [spec.kind for spec in log.registry.specs() if spec.owner == projection.name]
    if not owned:
        return False
    for kind in owned:
        if next(iter(log.scan_kind(kind, 1, seq + 1, limit=1)), None) is not None:
            return False
    return True


def parse_point(text: str, field: str = "--at") -> Point:
    """A seq (digits), a delta id (ULID) or an ISO-8601 time with a timezone (``field`` names
    the option in an error)."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    if len(text) == 26 and text.isalnum():
        return text
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValidationError(field, f"{text!r} is not a seq, a delta id or an ISO-8601 time") from None
    if when.tzinfo is None:
        raise ValidationError(field, f"{text!r} has no timezone; give one, e.g. "
                              f"{when.isoformat(timespec='seconds')}+00:00")
    return when


def to_builtins(value: Any) -> Any:
    return msgspec.to_builtins(value, enc_hook=_enc_hook)


def _enc_hook(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise NotImplementedError(type(value))


def json_flag(parser: argparse.ArgumentParser, help: str = "as JSON") -> None:
    """The ``--json`` flag every command that prints a result takes (``args.json``)."""
    parser.add_argument("--json", action="store_true", help=help)


def write_json(out: IO[str], value: Any) -> None:
    out.write(msgspec.json.encode(to_builtins(value), order="deterministic").decode() + "\n")


def record_json(rec: Record, *, vectors: bool = True) -> dict[str, Any]:
    """A record as JSON; without ``vectors`` an embedded vector is abridged to its space, its
    dimension and ``"abridged": true`` (its base64 float32 bytes run to kilobytes)."""
    delta = msgspec.to_builtins(rec.delta)
    if not vectors and rec.delta.vector is not None:
        delta["vector"] = abridged_vector(rec.delta.vector)
    return {"seq": rec.seq, "hash": rec.hash.hex(), "delta": delta}


def abridged_vector(v: Any) -> dict[str, Any]:
    """What `show` and `log` print of a vector unless asked for it whole (``--vectors``)."""
    return {"space": v.space, "dim": len(v.data) // 4, "abridged": True}


def console(out: IO[str], *, markup: bool = False) -> Console:
    """A rich console on ``out``. No emoji codes, and no markup unless the caller's strings are
    its own (the bench report): what the other commands print (braid ids, payload texts) is the
    user's text, where "[/x]" or ":thread:" mean nothing to rich."""
    from rich.console import Console

    from .tables import width

    return Console(file=out, soft_wrap=False, width=max(40, width()), markup=markup, emoji=False)


@contextlib.contextmanager
def progress_bar(label: str, total: int, *, enabled: bool = True) -> Iterator[Any]:
    """A rich progress bar on stderr when it is a terminal (a pipe or a log file gets nothing,
    not even the blank line a finished bar leaves); yields ``update(done)``. It is redrawn by
    each update, not by a thread of its own: a whole-log verify forks a child only while no
    other thread runs (lmdb/split.py)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    console = Console(stderr=True)
    if not enabled or total <= 0 or not console.is_terminal:
        yield lambda done: None
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn(), console=console, transient=True,
                  auto_refresh=False) as bar:
        task = bar.add_task(label, total=total)
        yield lambda done: bar.update(task, completed=done, refresh=True)


def summary(d: Any, width: int = 70) -> str:
    """A one-line summary of a delta's payload."""
    if getattr(d, "erased", None) is not None:
        return f"(erased by seq {d.erased.by})"
    p = d.payload
    for key in ("text", "summary", "title", "content", "value", "tool", "name"):
        if isinstance(p.get(key), str):
            text = p[key]
            break
    else:
        text = _json.encode(p).decode()
    return text if len(text) <= width else text[: width - 1] + "…"
