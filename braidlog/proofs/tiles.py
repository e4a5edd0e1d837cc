"""A C2SP tlog-tiles static directory of the log (https://c2sp.org/tlog-tiles): the signed
``checkpoint``, the Merkle tree's tiles ``tile/<L>/<N>[.p/<W>]`` and the entry bundles
``tile/entries/<N>[.p/<W>]`` (big-endian uint16 length-prefixed committed forms).

Tile ``n`` of level ``l`` holds ``MTH(D[(n*256+i) * 256**l : (n*256+i+1) * 256**l])`` for ``i`` up
to 255: at level 0 the leaf hashes, above the complete subtrees of level ``8*l`` that the store
keeps (``tree_hashes``). A later run over the same directory writes only what is new (the
tiles and bundles that the new records touch; a full one is never rewritten) and the checkpoint
last, so a reader never sees a checkpoint whose tiles are missing; a partial tile or bundle is
removed once its full one is written (tlog-tiles allows it). Files are written beside their
place and renamed into it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from .. import tree as merkle
from ..errors import IntegrityError, StorageError, ValidationError
from ..store import FullStore
from ..store.files import write_atomic
from . import verify as v
from .checkpoint import issue
from .keys import SigningKey
from .prove import root

__all__ = ["TilesReport", "write_tiles", "tile_path", "read_checkpoint_size"]

WIDTH = 256
HEIGHT = 8


class TilesReport(NamedTuple):
    """What a run wrote: the tree size, tiles and bundles written, bytes, the size before."""

    size: int
    tiles: int
    bundles: int
    bytes: int
    since: int


def tile_path(level: int | str, index: int, width: int = WIDTH) -> str:
    """``tile/<L>/<N>[.p/<W>]`` with N in 3-digit elements, all but the last ``x``-prefixed."""
    digits = f"{index:03d}"
    groups: list[str] = []
    while digits:
        groups.insert(0, digits[-3:].rjust(3, "0"))
        digits = digits[:-3]
    n = "/".join([f"x{g}" for g in groups[:-1]] + [groups[-1]])
    return f"tile/{level}/{n}" + (f".p/{width}" if width < WIDTH else "")


def read_checkpoint_size(directory: Path, key: SigningKey) -> tuple[int, bytes] | None:
    """The size and root of the checkpoint already in ``directory`` (None if there is none),
    after its signature by ``key`` verified."""
    path = directory / "checkpoint"
    if not path.exists():
        return None
    try:
        cp = v.open_checkpoint(path.read_bytes(), key.verifier())
    except v.VerificationError as e:
        raise IntegrityError(f"{path} is not a checkpoint of this log signed by "
                             f"{key.name}: {e}; give another directory") from None
    return cp.size, cp.root


def write_tiles(store: FullStore, directory: str | os.PathLike[str], key: SigningKey
                ) -> TilesReport:
    """Write (or bring up to the head) the tlog-tiles directory of ``store`` at ``directory``,
    with a checkpoint of the head signed by ``key`` (kept in the store as ``issue`` keeps it)."""
    out = Path(directory)
    if out.exists() and not out.is_dir():
        raise ValidationError("directory", f"{out} is a file, not a directory")
    out.mkdir(parents=True, exist_ok=True)
    size = store.head().seq
    before = read_checkpoint_size(out, key)
    since = 0
    if before is not None:
        since, old_root = before
        if since > size:
            raise IntegrityError(f"{out} holds a checkpoint of {since} entries, more than this "
                                 f"log's {size}: it is another log's directory", seq=size)
        if root(store, since) != old_root:
            raise IntegrityError(f"{out} holds a checkpoint of size {since} whose root is not this "
                                 "log's at that size: it is another log's directory, or the log "
                                 "was rewritten", seq=since)
    note = issue(store, key)  # first: a log that no longer extends its checkpoints stops here
    written = tiles = bundles = 0
    for path, data in _new_files(store, since, size):
        written += _put(out / path, data)
        if path.startswith("tile/entries/"):
            bundles += 1
        else:
            tiles += 1
    _put(out / "checkpoint", note.encode())
    return TilesReport(size, tiles, bundles, written, since)


def _new_files(store: FullStore, since: int, size: int) -> Iterator[tuple[str, bytes]]:
    """(path, bytes) of every tile and bundle the records ``since..size`` touch, level 0 and the
    bundles first, a chunk of 256 entries at a time."""
    if size == 0:
        return
    first = since // WIDTH  # the first level-0 tile (and bundle) that changes
    for n in range(first, (size + WIDTH - 1) // WIDTH):
        lo, hi = n * WIDTH, min((n + 1) * WIDTH, size)
        entries = [row.entry for row in store.scan_rows(lo + 1, hi + 1)]
        if len(entries) != hi - lo:
            raise IntegrityError(f"the log lacks records in {lo + 1}..{hi}", seq=lo + 1)
        width = hi - lo
        yield tile_path(0, n, width), b"".join(merkle.leaf_hash(e) for e in entries)
        yield tile_path("entries", n, width), b"".join(
            len(e).to_bytes(2, "big") + e for e in entries)
    level = 1
    while size >> (HEIGHT * level):
        span = 1 << (HEIGHT * level)  # entries under one hash of this level
        count = size // span  # complete subtrees of level 8*level
        for n in range((since // span) // WIDTH, (count + WIDTH - 1) // WIDTH):
            lo, hi = n * WIDTH, min((n + 1) * WIDTH, count)
            nodes = [(HEIGHT * level, i) for i in range(lo, hi)]
            yield tile_path(level, n, hi - lo), b"".join(store.tree_hashes(nodes))
        level += 1


def _put(path: Path, data: bytes) -> int:
    """Write ``path`` atomically (beside it, then renamed); remove the partial tiles it replaces
    when it is a full one. A full tile already there is left as it is (tiles are immutable)."""
    full = not any(part.endswith(".p") for part in path.parts) and path.name != "checkpoint"
    if path.name != "checkpoint" and path.is_file():
        if path.read_bytes() == data:
            return 0
        if full:
            raise IntegrityError(f"{path} exists with other bytes than this log's: the directory "
                                 "holds another log's tiles")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        write_atomic(path, data)
    except OSError as e:
        raise StorageError(f"cannot write {path}: {e}", hint="check the directory's permissions "
                           "and free space") from e
    if full:
        partial = path.with_name(path.name + ".p")
        if partial.is_dir():
            for p in partial.iterdir():
                p.unlink(missing_ok=True)
            partial.rmdir()
    return len(data)


def serve(directory: str | os.PathLike[str], port: int = 0, *, ready: Any = None) -> None:
    """Serve ``directory`` over HTTP on 127.0.0.1 as tlog-tiles asks (``checkpoint`` as
    text/plain, not cached; tiles and bundles as application/octet-stream, immutable) until
    interrupted; ``ready(url)`` is called once it listens."""
    import functools
    import http.server

    root_dir = Path(directory)
    if not (root_dir / "checkpoint").is_file():
        raise ValidationError("directory", f"{root_dir} has no checkpoint: write it first with "
                              "`braidlog tiles DIR --key FILE`")

    class Handler(http.server.SimpleHTTPRequestHandler):
        def guess_type(self, path: Any) -> str:
            if str(path).endswith("/checkpoint") or str(path) == "checkpoint":
                return "text/plain; charset=utf-8"
            return "application/octet-stream"

        def end_headers(self) -> None:
            if self.path.rstrip("/").endswith("/checkpoint"):
                self.send_header("Cache-Control", "no-cache, max-age=0")
            else:
                self.send_header("Cache-Control", "public, max-age=31536000, immutable")
            super().end_headers()

        def list_directory(self, path: Any) -> None:  # no listings: only the spec's paths
            self.send_error(404, "not a tile")
            return None

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", port), functools.partial(Handler, directory=str(root_dir)))
    try:
        if ready is not None:
            ready(f"http://127.0.0.1:{server.server_address[1]}/")
        server.serve_forever()
    finally:
        server.server_close()
