"""The pages-per-commit measurement (``python -m braidlog.bench.pages``) on real durable stores:
every layout writes, leaving a table out writes fewer bytes a commit, and the shipped commit
(format 5, its deferred entries written every 64th record) fewer than every index at once."""

import pytest

from braidlog.bench.pages import INDEXES, table


@pytest.fixture(scope="module")
def pages() -> dict[str, float]:
    """Pages a commit of every layout, measured once for the two tests that compare them."""
    return {name: pages for name, pages, calls, p50 in table(n=200, size=1000)}


def test_each_index_table_costs_pages_and_the_log_alone_costs_least(pages):
    got = pages
    shipped = got["braidlog, every index at once (format 4's commit)"]
    for t in INDEXES:
        assert got[f"braidlog without {t}"] < shipped, t
    assert got["braidlog, log only"] < min(got[f"braidlog without {t}"] for t in INDEXES)
    assert got["raw LMDB, one put"] < got["raw LMDB, log + 4 indexes"] < shipped


def test_the_shipped_commit_writes_fewer_pages_than_every_index_at_once(pages):
    assert pages["braidlog"] < pages["braidlog, every index at once (format 4's commit)"] - 3
