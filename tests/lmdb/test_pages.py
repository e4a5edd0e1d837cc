"""The structural check verify runs (braidlog.lmdb.pages) finds what py-lmdb's own finds, word
for word, on an intact store and on copies of it with one byte changed: it walks a leaf page of
plain nodes in one pass and gives every other page to py-lmdb's walk."""

from __future__ import annotations

import shutil

import lmdb
import lmdb.verify
import pytest

from braidlog import LmdbLog
from braidlog.bench.data import AgentSession
from braidlog.lmdb import pages

pytestmark = pytest.mark.skipif(pages.STOCK, reason="py-lmdb's own check runs unchanged here")


def _findings(fn, path: str) -> list[str] | str:
    try:
        return list(fn(path))
    except lmdb.verify.VerifyError as e:
        return f"VerifyError: {e}"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    """A store with every kind of page: the log, both id indexes, duplicate sets in sub-pages
    and in sub-trees (braid, kind, refers-to), a tail past the indexed-to mark, free pages."""
    path = str(tmp_path_factory.mktemp("pages") / "store")
    session = AgentSession(7, entities=50)
    with LmdbLog(path, durable=False) as log:
        log.append_batch(session.iter(3000, 0))
        for i in range(3000, 3020):
            log.append_batch(session.iter(1, i))
    return path


def test_an_intact_store_passes_both_and_most_leaves_take_the_one_pass(store, monkeypatch):
    taken = []
    plain = pages._Leaves._plain
    monkeypatch.setattr(pages._Leaves, "_plain", lambda self, ctx, buf: taken.append(
        plain(self, ctx, buf)) or taken[-1])
    assert _findings(pages.verify, store) == _findings(lmdb.verify.verify, store) == []
    assert sum(taken) > 0.8 * len(taken) > 50  # the test would not see a broken one-pass walk


def test_one_changed_byte_is_found_as_py_lmdb_finds_it(store, tmp_path, rng):
    data = (tmp_path / "intact.mdb")
    shutil.copyfile(f"{store}/data.mdb", data)
    raw = data.read_bytes()
    copy = tmp_path / "copy"
    copy.mkdir()
    psize, found = 4096, 0
    for _ in range(300):
        page = rng.randrange(2, len(raw) // psize)
        at = page * psize + rng.choice([rng.randrange(16), rng.randrange(16, 64),
                                        rng.randrange(psize)])
        flipped = bytearray(raw)
        flipped[at] ^= 1 << rng.randrange(8)
        (copy / "data.mdb").write_bytes(flipped)
        ours, theirs = _findings(pages.verify, str(copy)), _findings(lmdb.verify.verify, str(copy))
        assert ours == theirs, f"byte {at} (page {page}): {ours} != {theirs}"
        found += bool(theirs)
    assert found > 50  # enough of the changes were findings for the comparison to mean something
