"""The pages-per-commit measurement (``python -m braidlog.bench.pages``) on real durable stores:
every layout writes, and leaving a table out writes fewer bytes a commit."""

from braidlog.bench.pages import INDEXES, table


def test_each_index_table_costs_pages_and_the_log_alone_costs_least():
    got = {name: pages for name, pages, calls, p50 in table(n=200, size=1000)}
    shipped = got["braidlog"]
    for t in INDEXES:
        assert got[f"braidlog without {t}"] < shipped, t
    assert got["braidlog, log only"] < min(got[f"braidlog without {t}"] for t in INDEXES)
    assert got["raw LMDB, one put"] < got["raw LMDB, log + 4 indexes"] < shipped
