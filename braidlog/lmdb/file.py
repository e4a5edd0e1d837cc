"""The bytes of an LMDB ``data.mdb`` read without mapping it: its two meta pages and the few
pages under them that name each tree's last key.

LMDB maps the whole file and trusts it: a file cut short kills the process with SIGBUS when a
page past its end is touched, and a meta page carries no checksum. This module reads the file
with ``os.pread`` instead, so that a store can be refused (``check_size``) or a damaged meta page
reported (``meta_findings``) before, or without, handing the file to LMDB. Pure: no ``lmdb``
import, nothing written. Layouts follow ``mdb.c``; both the LMDB 0.9 (16-byte page header) and
1.0 (24-byte) files are understood, in the host's byte order, as LMDB writes them.
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path
from typing import NamedTuple

__all__ = ["Meta", "FileFinding", "read_metas", "settled_metas", "picked", "short_file", "meta_findings",
           "table_db", "last_key", "last_intact_key", "edge_findings", "table_entries"]

MAGIC = 0xBEEFC0DE
_E = "<" if sys.byteorder == "little" else ">"
_U16, _U32, _U64 = struct.Struct(_E + "H"), struct.Struct(_E + "I"), struct.Struct(_E + "Q")
_DB = struct.Struct(_E + "IHHQQQQQ")  # MDB_db: pad, flags, depth, branch, leaf, overflow, entries, root
_VERSIONS = {16: 1, 24: 3}  # page-header size -> the data version LMDB writes with it
P_BRANCH, P_LEAF, P_META, P_LEAF2 = 0x01, 0x02, 0x08, 0x20
F_BIGDATA, F_SUBDATA = 0x01, 0x02
P_INVALID = (1 << 64) - 1
MAX_DEPTH = 32  # LMDB's CURSOR_STACK
FREE_FLAGS = 0x08  # MDB_INTEGERKEY: the free-page tree's flags, fixed by mdb_env_init_meta


class FileFinding(Exception):
    """The file is not what LMDB expects at this place (the message says where and what)."""


class Db(NamedTuple):
    """An MDB_db record: a tree's root page, depth and entry count."""

    flags: int
    depth: int
    entries: int
    root: int


class Meta(NamedTuple):
    """One of LMDB's two meta pages: which commit it names and where that commit's trees are."""

    page: int  # 0 or 1
    magic: int
    version: int
    psize: int
    last_pgno: int
    txnid: int
    main: Db
    flags: int
    free: Db = Db(0, 0, 0, 0)

    def damage(self, hdr: int) -> str | None:
        """What is impossible in this meta page for a braidlog store, or None. LMDB checks
        none of it: a flipped flag of the free-page tree aborts the process at its first write
        (an assertion in mdb_cursor_init), one of the main tree at its first read."""
        if self.magic != MAGIC or self.version != _VERSIONS[hdr] or not self.flags & P_META:
            return (f"meta page {self.page} is damaged (magic {self.magic:#x}, version "
                    f"{self.version}, flags {self.flags:#x})")
        if self.free.flags != FREE_FLAGS:
            return (f"meta page {self.page} is damaged: its free-page tree has flags "
                    f"{self.free.flags:#x}, where LMDB always writes {FREE_FLAGS:#x}")
        if self.main.flags != 0:
            return (f"meta page {self.page} names main-tree flags {self.main.flags:#x}, which "
                    "braidlog never writes: the page is damaged, or this is not a braidlog store")
        return None

    @property
    def needs(self) -> int:
        """Bytes the file must hold for every page this commit uses."""
        return (self.last_pgno + 1) * self.psize


def _header_size(head: bytes) -> int:
    for hdr in _VERSIONS:
        if len(head) >= hdr + 4 and _U32.unpack_from(head, hdr)[0] == MAGIC:
            return hdr
    raise FileFinding("it is not an LMDB data file (no LMDB magic number in its first page)")


def _meta(buf: bytes, page: int, hdr: int) -> Meta:
    flags = _U16.unpack_from(buf, hdr - 6)[0]
    m = hdr
    magic, version = _U32.unpack_from(buf, m)[0], _U32.unpack_from(buf, m + 4)[0]
    psize = _U32.unpack_from(buf, m + 24)[0]  # mm_psize lives in the free DB's md_pad
    free, main = (Db(*(_DB.unpack_from(buf, at)[i] for i in (1, 2, 6, 7))) for at in (m + 24, m + 72))
    last, txnid = _U64.unpack_from(buf, m + 120)[0], _U64.unpack_from(buf, m + 128)[0]
    return Meta(page, magic, version, psize, last, txnid, main, flags, free)


def read_metas(fd: int) -> tuple[int, Meta, Meta]:
    """(page-header size, meta page 0, meta page 1) of the open data file ``fd``.

    Raises FileFinding when the file is too short for two meta pages or is not LMDB's."""
    head = os.pread(fd, 512, 0)
    hdr = _header_size(head)
    m0 = _meta(head, 0, hdr)
    psize = m0.psize
    if psize < 512 or psize > 65536 or psize & (psize - 1):
        raise FileFinding(f"meta page 0 names an impossible page size {psize}")
    second = os.pread(fd, hdr + 136, psize)
    if len(second) < hdr + 136:
        raise FileFinding(f"it ends at {os.fstat(fd).st_size} bytes, inside meta page 1 "
                          f"(pages are {psize} bytes)")
    return hdr, m0, _meta(second, 1, hdr)


def picked(m0: Meta, m1: Meta) -> Meta:
    """The meta page LMDB uses: the one naming the later commit (page 0 on a tie)."""
    return m1 if m1.txnid > m0.txnid else m0


def short_file(path: Path) -> str | None:
    """Why ``path`` (a data.mdb) cannot be mapped safely, or None when it can. An empty file is
    fine (LMDB writes a new one there); a file whose meta page names a page past its end is not:
    touching that page would kill the process with SIGBUS."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return None
        try:
            hdr, m0, m1 = read_metas(f.fileno())
        except FileFinding as e:
            return f"{path} is {os.fstat(f.fileno()).st_size:,} bytes and {e}"
        # the size after the meta pages: a writer extends the file before it commits a meta page
        # naming the new pages, so a store growing meanwhile is never taken for a short one
        size = os.fstat(f.fileno()).st_size
    bad = [why for why in (m0.damage(hdr), m1.damage(hdr)) if why]
    if bad:
        return f"{path}: {bad[0]}"
    m = picked(m0, m1)
    if size < m.needs:
        return (f"{path} is {size:,} bytes, but its meta page {m.page} (commit {m.txnid}) names "
                f"page {m.last_pgno:,}, which needs {m.needs:,} bytes: the file was cut short "
                "(a partial copy?) or that meta page is damaged")
    return _main_tree(path, hdr, m)


def _main_tree(path: Path, hdr: int, meta: Meta) -> str | None:
    """Why the main tree (read by every open) is unsafe to read, or None. Its pages are read
    without a read transaction to keep them: a writer may have reused one meanwhile, which only
    a commit two past ``meta``'s can do, so a finding counts only if the store did not move."""
    for _ in range(100):
        with open(path, "rb") as f:
            if meta.main.root == P_INVALID:
                return None
            try:
                _Reader(f.fileno(), hdr, meta.psize, meta.last_pgno).whole(meta.main.root)
                return None
            except FileFinding as e:
                found = str(e)
            now = picked(*read_metas(f.fileno())[1:])
        if now.txnid <= meta.txnid + 1:
            return (f"{path}: the main tree (which names every table) is damaged: {found}; "
                    "LMDB would read past the page")
        meta = now
    return None  # the store moved under every attempt: LMDB's own read will see a stable one


def edge_findings(path: Path, table: bytes) -> str | None:
    """Why reading the last records of ``table`` is unsafe (a page on the way to its last two
    leaves runs past itself or the file), or None. Read under a read transaction of the store."""
    with open(path, "rb") as f:
        fd = f.fileno()
        hdr, m0, m1 = read_metas(fd)
        meta = picked(m0, m1)
        if meta.main.root == P_INVALID:
            return None
        try:
            db = table_db(fd, hdr, meta, table)
            if db.root != P_INVALID:
                _Reader(fd, hdr, meta.psize, meta.last_pgno).edge(db.root, 2)
        except FileFinding as e:
            return str(e)
    return None


class _Reader:
    """Pages of one file, read with pread and checked before anything in them is trusted."""

    def __init__(self, fd: int, hdr: int, psize: int, last_pgno: int) -> None:
        self.fd, self.hdr, self.psize, self.last = fd, hdr, psize, last_pgno
        self.base = hdr if hdr == 24 else 0  # LMDB 1.0 counts node offsets from past the header

    def page(self, pgno: int) -> bytes:
        if not 2 <= pgno <= self.last:
            raise FileFinding(f"a tree points at page {pgno}, outside pages 2..{self.last}")
        buf = os.pread(self.fd, self.psize, pgno * self.psize)
        if len(buf) < self.psize:
            raise FileFinding(f"page {pgno} lies past the end of the file")
        if _U64.unpack_from(buf, 0)[0] != pgno:
            raise FileFinding(f"page {pgno} says it is page {_U64.unpack_from(buf, 0)[0]}")
        return buf

    def nodes(self, buf: bytes, pgno: int) -> list[int]:
        lower, upper = _U16.unpack_from(buf, self.hdr - 4)[0], _U16.unpack_from(buf, self.hdr - 2)[0]
        floor = self.hdr - self.base
        if lower < floor or lower > upper or upper > self.psize - self.base:
            raise FileFinding(f"page {pgno} has impossible bounds (lower {lower}, upper {upper})")
        n = (lower - floor) >> 1
        offs = [_U16.unpack_from(buf, self.hdr + 2 * i)[0] + self.base for i in range(n)]
        if not offs or any(not upper + self.base <= o <= self.psize - 8 for o in offs):
            raise FileFinding(f"page {pgno} has no readable nodes")
        return offs

    def node(self, buf: bytes, off: int, pgno: int) -> tuple[int, int, int, bytes]:
        lo, hi, flags, ksize = struct.unpack_from(_E + "HHHH", buf, off)
        if off + 8 + ksize > self.psize:
            raise FileFinding(f"page {pgno} has a key running past its end")
        return lo | hi << 16, flags, ksize, buf[off + 8: off + 8 + ksize]

    def checked(self, pgno: int) -> tuple[bytes, int, list[int]]:
        """Page ``pgno`` whose every node lies within it, a leaf's data too (or its overflow
        pages within the file), and a branch's children within the file: (bytes, flags, node
        offsets). What LMDB reads of such a page stays inside the file."""
        buf = self.page(pgno)
        flags = _U16.unpack_from(buf, self.hdr - 6)[0]
        if not flags & (P_BRANCH | P_LEAF) or flags & P_LEAF2:
            raise FileFinding(f"page {pgno} is neither a branch nor a leaf (flags {flags:#x})")
        offs = self.nodes(buf, pgno)
        for off in offs:
            size, nflags, ksize, _ = self.node(buf, off, pgno)
            end = off + 8 + ksize
            if flags & P_BRANCH:
                self.page(size | nflags << 32)  # the child: within the file, and the page it says
            elif nflags & F_BIGDATA:
                if end + 8 > self.psize:
                    raise FileFinding(f"page {pgno} has an overflow node running past its end")
                first = _U64.unpack_from(buf, end)[0]
                if not 2 <= first or first + (size + self.hdr - 1) // self.psize > self.last:
                    raise FileFinding(f"page {pgno} names overflow pages {first}.. for {size} "
                                      f"bytes, past the file's last page {self.last}")
            elif end + size > self.psize:
                raise FileFinding(f"page {pgno} has data running past its end")
        return buf, flags, offs

    def edge(self, pgno: int, leaves: int, depth: int = 1) -> None:
        """Check (``checked``) the pages on the way to the last ``leaves`` (1 or 2) leaves of the
        tree under ``pgno``: all that reading a table's last records touches."""
        if depth > MAX_DEPTH:
            raise FileFinding(f"the tree under page {pgno} is deeper than {MAX_DEPTH} levels")
        buf, flags, offs = self.checked(pgno)
        if flags & P_BRANCH:
            children = [self.node(buf, off, pgno) for off in offs[-2:]]
            self.edge(children[-1][0] | children[-1][1] << 32, leaves, depth + 1)
            if leaves == 2 and len(children) == 2:
                self.edge(children[0][0] | children[0][1] << 32, 1, depth + 1)

    def whole(self, pgno: int, depth: int = 1) -> None:
        """Check (``checked``) every page of the tree under ``pgno`` (for the small main tree)."""
        if depth > MAX_DEPTH:
            raise FileFinding(f"the tree under page {pgno} is deeper than {MAX_DEPTH} levels")
        buf, flags, offs = self.checked(pgno)
        if flags & P_BRANCH:
            for off in offs:
                lo_hi, nflags, _, _ = self.node(buf, off, pgno)
                self.whole(lo_hi | nflags << 32, depth + 1)

    def last_leaf_node(self, root: int, depth: int) -> tuple[bytes, int, int, int]:
        """(page, its last node's offset, pgno, node count) of the rightmost leaf of a tree."""
        pgno = root
        for _ in range(max(depth, 1) + 1):
            buf = self.page(pgno)
            flags = _U16.unpack_from(buf, self.hdr - 6)[0]
            offs = self.nodes(buf, pgno)
            if flags & P_BRANCH:
                lo_hi, nflags, _, _ = self.node(buf, offs[-1], pgno)
                pgno = lo_hi | nflags << 32  # a branch node keeps its child's pgno in lo, hi, flags
                continue
            if flags & P_LEAF and not flags & P_LEAF2:
                return buf, offs[-1], pgno, len(offs)
            raise FileFinding(f"page {pgno} is neither a branch nor a leaf (flags {flags:#x})")
        raise FileFinding(f"the tree under page {root} is deeper than its depth {depth}")

    def find_leaf(self, root: int, depth: int, key: bytes) -> tuple[bytes, int, int]:
        """The node holding ``key`` in a small tree (the main DB), found by a linear scan of
        each page: (page, node offset, pgno)."""
        pgno = root
        for _ in range(max(depth, 1) + 1):
            buf = self.page(pgno)
            flags = _U16.unpack_from(buf, self.hdr - 6)[0]
            offs = self.nodes(buf, pgno)
            if flags & P_BRANCH:
                child: int | None = None
                for i, off in enumerate(offs):
                    lo_hi, nflags, _, k = self.node(buf, off, pgno)
                    if i == 0 or k <= key:
                        child = lo_hi | nflags << 32
                assert child is not None  # nodes() returns at least one node
                pgno = child
                continue
            for off in offs:
                if self.node(buf, off, pgno)[3] == key:
                    return buf, off, pgno
            raise FileFinding(f"the main tree has no table {key.decode(errors='replace')!r}")
        raise FileFinding(f"the main tree under page {root} is deeper than its depth {depth}")


def table_db(fd: int, hdr: int, meta: Meta, table: bytes) -> Db:
    """The MDB_db record of the named table in the commit ``meta`` names, read from the file."""
    r = _Reader(fd, hdr, meta.psize, meta.last_pgno)
    if meta.main.root == P_INVALID:
        raise FileFinding(f"meta page {meta.page} names no main tree")
    buf, off, pgno = r.find_leaf(meta.main.root, meta.main.depth, table)
    size, flags, ksize, _ = r.node(buf, off, pgno)
    if not flags & F_SUBDATA or size != 48 or off + 8 + ksize + 48 > len(buf):
        raise FileFinding(f"the main tree's entry {table.decode(errors='replace')!r} is not a table")
    return Db(*(_DB.unpack_from(buf, off + 8 + ksize)[i] for i in (1, 2, 6, 7)))


def last_key(fd: int, hdr: int, meta: Meta, table: bytes) -> bytes | None:
    """The last key of the named table in the commit ``meta`` names (None for an empty one),
    read from the file. Raises FileFinding where a page is not what the tree says."""
    r = _Reader(fd, hdr, meta.psize, meta.last_pgno)
    db = table_db(fd, hdr, meta, table)
    if db.root == P_INVALID:
        return None
    leaf, off, pgno, _ = r.last_leaf_node(db.root, db.depth)
    return r.node(leaf, off, pgno)[3]


def table_entries(path: Path, table: bytes) -> int | None:
    """The entry count of the named table that the committed meta page's tree records, read from
    the file (None when it cannot be read: the page check will say why). Read under a read
    transaction of the store."""
    try:
        with open(path, "rb") as f:
            fd = f.fileno()
            hdr, m0, m1 = settled_metas(fd)
            return table_db(fd, hdr, picked(m0, m1), table).entries
    except (OSError, ValueError, FileFinding, struct.error):
        return None


def last_intact_key(path: Path, table: bytes, bad: set[int]) -> bytes | None:
    """The last key of ``table`` stored before, in key order, the first page that is in ``bad``
    or fails this module's checks (None when there is none): every key up to it is reached
    through checked pages only. Read under a read transaction of the store."""
    with open(path, "rb") as f:
        fd = f.fileno()
        hdr, m0, m1 = read_metas(fd)
        meta = picked(m0, m1)
        r = _Reader(fd, hdr, meta.psize, meta.last_pgno)
        last: bytes | None = None

        def walk(pgno: int, depth: int) -> bool:  # False: stop, a page on the way is damaged
            nonlocal last
            if pgno in bad or depth > MAX_DEPTH:
                return False
            buf = r.page(pgno)
            flags = _U16.unpack_from(buf, hdr - 6)[0]
            offs = r.nodes(buf, pgno)
            if flags & P_BRANCH:
                for off in offs:
                    lo_hi, nflags, _, _ = r.node(buf, off, pgno)
                    if not walk(lo_hi | nflags << 32, depth + 1):
                        return False
                return True
            if flags & P_LEAF and not flags & P_LEAF2:
                last = r.node(buf, offs[-1], pgno)[3]
                return True
            return False
        try:
            db = table_db(fd, hdr, meta, table)
            if db.root != P_INVALID:
                walk(db.root, 1)
        except FileFinding:
            pass
        return last


#: How many times ``settled_metas`` reads the two meta pages, at most, for two reads that agree.
SETTLE_TRIES = 1000


def settled_metas(fd: int) -> tuple[int, Meta, Meta]:
    """``read_metas``, read again until two reads in a row agree. The two pages are two reads,
    and a writer in another process may commit between them (each commit writes the page of its
    parity): page 0 read before commit 91 and page 1 after commit 95 would name commits 90 and
    95, which no file ever held. A damaged page reads the same every time; pages a writer keeps
    rewriting are not damaged (after this many tries, the last read is given)."""
    got = read_metas(fd)
    for _ in range(SETTLE_TRIES):
        again = read_metas(fd)
        if again == got:
            break
        got = again
    return got


def meta_findings(path: Path, table: bytes) -> list[str]:
    """What is wrong with the two meta pages of ``path`` (a data.mdb); empty when nothing is.

    Checks what LMDB itself does not: page 0 holds an even commit number and page 1 an odd one
    (each commit writes the page of its parity), the two name consecutive commits, and the later
    one is not behind the earlier one (its last page and the last key of ``table`` are at or past
    the other's: a flipped commit number that makes LMDB open the older commit shows here when
    the newer commit added to ``table``). Read it under a read transaction of the store, which
    keeps both commits' pages from being reused while this runs."""
    out: list[str] = []
    with open(path, "rb") as f:
        fd = f.fileno()
        try:
            hdr, m0, m1 = settled_metas(fd)
        except FileFinding as e:
            return [f"{path}: {e}"]
        for m in (m0, m1):
            why = m.damage(hdr)
            if why:
                out.append(why)
            elif m.psize != m0.psize:
                out.append(f"meta page {m.page} names page size {m.psize}, page 0 says {m0.psize}")
            elif m.txnid and m.txnid % 2 != m.page:
                out.append(f"meta page {m.page} names commit {m.txnid}, which meta page "
                           f"{1 - m.page} would hold (each commit writes the page of its parity)")
        if out:
            return out
        new, old = (m1, m0) if m1.txnid > m0.txnid else (m0, m1)
        if new.txnid and new.txnid - old.txnid != 1:
            return [f"meta pages name commits {m0.txnid} (page 0) and {m1.txnid} (page 1); "
                    "they must be consecutive: one of the two commit numbers is damaged"]
        if old.txnid == 0 and new.txnid <= 1:
            return []
        size = os.fstat(fd).st_size
        keys: list[bytes | None | FileFinding] = []
        for m in (new, old):
            if m.needs > size:
                return [f"meta page {m.page} (commit {m.txnid}) names page {m.last_pgno}, past "
                        f"the end of the {size}-byte file"]
            try:
                keys.append(last_key(fd, hdr, m, table))
            except FileFinding as e:
                keys.append(e)
        if isinstance(keys[0], FileFinding):
            return [f"the commit meta page {new.page} names (commit {new.txnid}) cannot be read: "
                    f"{keys[0]}"]
        if new.last_pgno < old.last_pgno:
            out.append(f"meta page {new.page} names commit {new.txnid} but ends at page "
                       f"{new.last_pgno}, before page {old.last_pgno} of the earlier commit "
                       f"{old.txnid} (meta page {old.page}): its commit number is damaged, and "
                       "LMDB opens an older commit than the last one")
        elif not isinstance(keys[1], FileFinding) and (keys[0] or b"") < (keys[1] or b""):
            out.append(f"meta page {new.page} names commit {new.txnid}, whose table "
                       f"{table.decode()} ends before that of the earlier commit {old.txnid} "
                       f"(meta page {old.page}): its commit number is damaged, and LMDB opens an "
                       "older commit than the last one")
    return out
