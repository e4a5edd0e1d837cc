"""The pages-per-commit measurement (``python -m braidlog.bench.pages``) on real durable stores:
every layout writes, and leaving a table out writes fewer bytes a commit."""

import pytest

from braidlog.bench.pages import INDEXES, table


@pytest.fixture(scope="module")
def pages() -> dict[str, float]:
    """Pages a commit of every layout, measured once for the two tests that compare them."""
    return {name: pages for name, pages, calls, p50 in table(n=200, size=1000)}


def test_each_index_table_costs_pages_and_the_log_alone_costs_least(pages):
    got = pages
    shipped = got["braidlog"]
    for t in INDEXES:
        assert got[f"braidlog without {t}"] < shipped, t
    assert got["braidlog, log only"] < min(got[f"braidlog without {t}"] for t in INDEXES)
    assert got["raw LMDB, one put"] < got["raw LMDB, log + 4 indexes"] < shipped


@pytest.mark.parametrize("idh", [False, True])
def test_the_deferred_index_prototype_reads_what_the_shipped_store_reads(tmp_path, idh):
    from braidlog import LmdbLog
    from braidlog.bench.data import AgentSession
    from braidlog.bench.pages import deferred

    ds = AgentSession(7).deltas(300)
    shipped, proto = LmdbLog(tmp_path / "a"), deferred(64, idh=idh)(tmp_path / "b")
    for d in ds[:100]:
        shipped.append(d)
        proto.append(d)
    shipped.append_batch(ds[100:])
    proto.append_batch(ds[100:])
    for _ in (0, 1):  # the index written up to some seq, the log's tail past it
        for braid in sorted({d.braid_id for d in ds}):
            assert proto.braid_head(braid) == shipped.braid_head(braid)
            assert ([r.seq for r in proto.scan_braid(braid, 50, 290, reverse=True)]
                    == [r.seq for r in shipped.scan_braid(braid, 50, 290, reverse=True)])
        proto.append(AgentSession(8).deltas(1)[0])
        shipped.append(AgentSession(8).deltas(1)[0])
    # an idempotent retry of records on both sides of indexed-to finds them (no second write)
    assert proto.append_batch([ds[10], ds[299]]) == shipped.append_batch([ds[10], ds[299]]) == [11, 300]
    assert proto.get(ds[299].id).seq == 300
    # the log's chain and tree as the shipped store's (its index check is not carried over)
    assert proto.verify(1, proto.head().seq + 1).seq == shipped.head().seq
    shipped.close()
    proto.close()


def test_the_deferred_index_prototype_writes_fewer_pages_a_commit(pages):
    got = pages
    proto = got["braidlog, braid+kind+refs deferred to every 64th record (prototype)"]
    assert proto < got["braidlog"] - 3
