"""Start-up: a fresh interpreter that imports braidlog, or runs ``braidlog head``, against one
that imports the libraries braidlog is built on (lmdb, msgspec, blake3 and ulid) together.

Each bench times one command line, a new process per round (``braidlog.bench.startup_commands``
gives the same command lines ``braidlog bench`` times). Targets: ``import braidlog`` at most
1.5× and ``braidlog head`` at most 2× the peer import; the session summary gives the ratios.
"""

from __future__ import annotations

import pytest

from braidlog import LmdbLog, bench

ROUNDS = 15


@pytest.fixture(scope="module")
def commands(tmp_path_factory):
    store = tmp_path_factory.mktemp("startup") / "store"
    LmdbLog(store).close()
    return bench.startup_commands(str(store))


@pytest.mark.parametrize("key", [(bench.PEER_IMPORT, "import ms"), ("braidlog", "import ms"),
                                 ("braidlog", "head ms"), ("python, importing nothing", "import ms")],
                         ids=["import lmdb+msgspec+blake3+ulid", "import braidlog", "braidlog head",
                              "python -c pass"])
def test_startup(benchmark, rates, commands, key):
    """One fresh process running the command, to its exit."""
    benchmark.group = "start-up"
    argv = commands[key]
    bench.launch(argv)  # warm the page cache
    benchmark.pedantic(bench.launch, args=(argv,), rounds=ROUNDS, iterations=1)
    rates.record(f"startup:{key[0]} {key[1]}", 1)
