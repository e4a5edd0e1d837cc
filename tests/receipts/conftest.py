"""Fixtures of the receipts tests: a store of embedded memories (on disk, with a braid over
it) and a signing key with its verifier key."""

from __future__ import annotations

import pytest

import braidlog
from braidlog.recall import embed_delta
from tests.support.tlog import GO_HOW, build_tlogcheck, have_go

MEMORIES = ["she drinks her coffee black, no sugar", "allergic to peanuts and shellfish",
            "has a dog named Rex, a border collie", "likes jazz, especially Coltrane",
            "works as a nurse on night shifts", "prefers tea in the evening"]


@pytest.fixture
def store_path(tmp_path):
    """An LMDB store holding MEMORIES (embedded, braid ``alice``), at seqs 1..6."""
    path = tmp_path / "store"
    with braidlog.open(path, projections=[]) as b:
        for text in MEMORIES:
            b.append(embed_delta(braidlog.delta("alice", "message", {"text": text})))
    return path


@pytest.fixture
def braid(store_path):
    with braidlog.open(store_path, projections=[]) as b:
        yield b


@pytest.fixture
def keys(tmp_path):
    """(signing key file, verifier key text) of a new Ed25519 key."""
    from braidlog import proofs

    key = proofs.generate("example.com/agent-memory")
    path = tmp_path / "log.key"
    proofs.write_key(key, path)
    return path, str(key.verifier())


@pytest.fixture(scope="session")
def tlogcheck(tmp_path_factory):
    """tests/proofs/go/tlogcheck.go (Go's own golang.org/x/mod/sumdb/tlog and note, nothing of
    braidlog's) built with Debian's Go; the test is skipped, saying how to install them, when
    they are missing."""
    if not have_go():
        pytest.skip(GO_HOW)
    return build_tlogcheck(tmp_path_factory.mktemp("go"))
