"""Recall's vectors (``recall/vectors.py``): beside a store they live in file-backed maps, not in
the process's anonymous memory, and every query reads them as it read numpy arrays."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from braidlog import LmdbLog
from braidlog.recall import Recall
from tests.support.recall import DIM, SMALL, deltas, vectors

pytestmark = pytest.mark.skipif(os.name != "posix", reason="file-backed maps are used on POSIX only")


@pytest.fixture
def store(tmp_path):
    """An LMDB store of 1,200 vectored deltas (plus 120 without), and the vectors."""
    x = vectors(1200)
    log = LmdbLog(tmp_path / "store", durable=False)
    log.append_batch(deltas(x))
    yield log, x
    log.close()


def anon_kb() -> int:
    with open("/proc/self/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith("RssAnon"))


def test_an_index_beside_its_store_maps_its_vectors_and_answers_as_one_in_memory(store, tmp_path, monkeypatch):
    """Every kind of query (at the head, as of a seq, reproducible, filtered, by a predicate,
    exact below the first block) gets the same seqs and scores from an index whose vectors are
    file-backed maps as from one that holds them in numpy arrays."""
    from braidlog.recall import vectors as rows_module

    monkeypatch.setattr(rows_module, "CHUNK", 256)  # several chunks, one partly filled
    log, x = store
    mapped = Recall(log, threads=1, **SMALL)  # one thread: the same graphs both sides
    plain = Recall(log, directory=False, threads=1, **SMALL)
    rows = mapped._rows
    assert rows.nbytes == 5 * 256 * DIM * 4 and rows.mapped == rows.nbytes
    assert plain._rows.mapped == 0
    ids = {log.read(s).delta.id for s in range(1, 400)}
    kinds = [dict(), dict(as_of=700), dict(as_of=700, reproducible=True), dict(braid="b1"),
             dict(tags="odd", as_of=900), dict(where=ids), dict(where=lambda i: i in ids)]
    for i in (3, 500, 1100):
        for kw in kinds:
            a, b = mapped.search(x[i], 10, **kw), plain.search(x[i], 10, **kw)
            assert a[0].tolist() == b[0].tolist() and a[1].tobytes() == b[1].tobytes(), kw
    small = Recall(log, directory=False, block=4096)  # no graph: every query exact
    small_mapped = Recall(log, directory=tmp_path / "other", block=4096)
    assert small_mapped._rows.mapped and small._head is None
    for i in (0, 640):
        assert small.search(x[i], 7)[0].tolist() == small_mapped.search(x[i], 7)[0].tolist()


def test_a_saved_index_maps_its_vectors_file_and_grows_past_it(store, monkeypatch):
    from braidlog.recall import vectors as rows_module

    monkeypatch.setattr(rows_module, "CHUNK", 256)
    log, x = store
    first = Recall(log, threads=1, **SMALL)
    first.close()
    again = Recall(log, threads=1, **SMALL)  # loaded: four full chunks from the file, the rest rewritten
    assert again.notices == [] and again._rows.mapped == again._rows.nbytes
    assert not any(c.flags.writeable for c in again._rows._chunks[:4])
    more = vectors(300, seed=5)
    log.append_batch(deltas(more, start=5000))
    plain = Recall(log, directory=False, threads=1, **SMALL)
    assert again.catch_up() == plain.covered_seq and again.count == plain.count == 1500
    assert np.array_equal(again._rows.slice(0, 1500), plain._rows.slice(0, 1500))
    for q in (x[10], more[250]):  # the blocks and exact search read the vectors (a loaded head
        for kw in (dict(as_of=1000, reproducible=True), dict(braid="b2")):  # graph grows anew)
            a, b = again.search(q, 10, **kw), plain.search(q, 10, **kw)
            assert a[0].tolist() == b[0].tolist() and a[1].tobytes() == b[1].tobytes()
    again.close()  # a new generation: the file the first chunks map is dropped, the map stays
    assert again.search(x[10], 3, braid="b2")[0].tolist() == plain.search(x[10], 3, braid="b2")[0].tolist()
    assert np.array_equal(again._rows.slice(0, 1500), plain._rows.slice(0, 1500))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RssAnon is Linux's")
def test_mapped_vectors_are_not_the_processs_anonymous_memory(tmp_path):
    from braidlog.recall.vectors import Rows, trim_heap

    block = np.random.default_rng(2).normal(size=(50_000, 256)).astype(np.float32)  # 51 MB
    trim_heap()
    before = anon_kb()
    rows = Rows(256, tmp_path / "home")
    rows.append(block)
    mapped_kb = anon_kb() - before
    plain = Rows(256)
    plain.append(block)
    plain_kb = anon_kb() - before - mapped_kb
    assert rows.mapped == rows.nbytes and mapped_kb < 5_000 < 45_000 < plain_kb, (mapped_kb, plain_kb)
    assert np.array_equal(rows.slice(0, 50_000), block)
    assert list((tmp_path / "home").iterdir()) == []  # the scratch file has no name


def test_where_no_file_can_be_mapped_the_vectors_stay_in_memory(tmp_path):
    from braidlog.recall.vectors import Rows

    (tmp_path / "a-file").write_text("not a directory")
    rows = Rows(4, tmp_path / "a-file" / "home")
    block = np.arange(40, dtype=np.float32).reshape(10, 4)
    rows.append(block)
    assert rows.mapped == 0 and np.array_equal(rows.slice(0, 10), block)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_that_appends_never_writes_into_its_parents_rows(tmp_path, monkeypatch):
    from braidlog.recall import vectors as rows_module

    monkeypatch.setattr(rows_module, "CHUNK", 8)
    rows = rows_module.Rows(2, tmp_path)
    ones = np.ones((5, 2), dtype=np.float32)
    rows.append(ones)
    pid = os.fork()
    if pid == 0:  # the child: appends into what was the shared, partly filled chunk
        code = 1
        try:
            rows.append(np.full((6, 2), 7, dtype=np.float32))
            ok = np.array_equal(rows.slice(0, 11), np.concatenate([ones, np.full((6, 2), 7)]))
            code = 0 if ok and rows.mapped == 0 else 2  # the shared chunk copied, the next in memory
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert np.array_equal(rows.slice(0, 5), ones) and not rows._chunks[0][5:].any()  # nothing of the child's
    rows.append(np.full((4, 2), 3, dtype=np.float32))
    assert np.array_equal(rows.slice(0, 9), np.concatenate([ones, np.full((4, 2), 3)]))
