"""py-lmdb's structural check of a data file (``lmdb.verify``), with its commonest step, walking
a leaf page of plain nodes, taken a page at a time.

py-lmdb's verifier is a pure-Python walk over every page, and a store's pages are nearly all
leaves of plain nodes (the log's rows, the id and id-digest keys, the seqs of a key's duplicate
sub-tree): three quarters of its time went to them, a node at a time through four calls. Here
such a page is read in one pass that changes nothing until the whole page has passed: every node
in bounds, its key inside the page and above the one before it (LMDB's byte order), its value
inside the page, no flags. The page then leaves exactly what py-lmdb's own walk leaves (the last
key, the entry count) and no finding. Any page that is not so (a flag, a bound crossed, a key out
of order, a free-list page, another key order) is walked by py-lmdb's own code from its start,
so every finding is py-lmdb's, word for word.

The step reads py-lmdb's private walker, so it is taken only under the py-lmdb versions it was
checked against (``_CHECKED``; tests/lmdb/test_pages.py compares the findings of both walks on
intact and damaged files); under any other, ``verify`` is py-lmdb's unchanged.
"""

from __future__ import annotations

import os
import struct
from typing import Any

import lmdb
from lmdb import verify as _stock

__all__ = ["VerifyError", "verify", "STOCK"]

VerifyError = _stock.VerifyError
#: py-lmdb versions whose private walker ``_Leaves`` was checked against.
_CHECKED = ("3.0.0",)
#: True when this py-lmdb is not one of them: ``verify`` is then py-lmdb's own, unchanged.
STOCK = lmdb.__version__ not in _CHECKED or not hasattr(_stock, "_Verifier")

_Base: Any = object if STOCK else _stock._Verifier


class _Leaves(_Base):  # py-lmdb's verifier is untyped: Any
    """py-lmdb's verifier, walking a leaf page of plain nodes in one pass (see the module)."""

    def _walk_leaf(self, ctx: dict[str, Any], pgno: int, buf: bytes) -> None:
        if ctx["is_free"] or ctx["key_cmp"] is not _stock._cmp_lexical or not self._plain(ctx, buf):
            super()._walk_leaf(ctx, pgno, buf)

    def _plain(self, ctx: dict[str, Any], buf: bytes) -> bool:
        """Take a leaf page whose every node is plain and in order (as py-lmdb's walk would,
        with no finding) and return True; False, having changed nothing, for any other."""
        psize, hdrsz, pagebase = self.psize, self.hdrsz, self.pagebase
        lower, upper = _BOUNDS.unpack_from(buf, hdrsz - 4)
        floor = hdrsz - pagebase
        if lower < floor or upper > psize - pagebase or lower > upper:
            return False
        numkeys = (lower - floor) >> 1
        low = upper + pagebase  # no node starts below the free space
        pad = 1 if self.eng["has_txnid"] else 0  # LMDB 1.0 pads a key to an even length
        last = ctx["last_key"]
        node = _NODE.unpack_from
        for ptr in struct.unpack_from(_E + "H" * numkeys, buf, hdrsz):
            o = ptr + pagebase
            if o + 8 > psize or o < low:
                return False
            lo, hi, flags, ksize = node(buf, o)
            kend = o + 8 + ksize
            if flags or kend > psize or kend + (ksize & pad) + (lo | hi << 16) > psize:
                return False
            key = buf[o + 8:kend]
            if last is not None and key <= last:
                return False
            last = key
        ctx["last_key"] = last
        ctx["entries"] += numkeys
        return True


_E = _stock._E if not STOCK else "="
_BOUNDS = struct.Struct(_E + "HH")  # mp_lower, mp_upper: the page header's last four bytes
_NODE = struct.Struct(_E + "HHHH")  # a node: mn_lo, mn_hi (data size), mn_flags, mn_ksize


def verify(path: str) -> list[str]:
    """``lmdb.verify.verify(path)``: the findings of py-lmdb's structural check of the
    environment at ``path`` (a directory), [] when it passes; VerifyError when it cannot begin."""
    if STOCK:
        return list(_stock.verify(path))
    with open(_stock.resolve_data_path(path), "rb") as f:
        f.seek(0, os.SEEK_END)
        return list(_Leaves(f, f.tell()).verify())
