"""Single-byte flips of a ~2,000-delta data.mdb: every one must end as no effect, refused at
open, or found by verify with a braidlog error. Never a silent wrong answer, a crash or a hang.

Each trial flips one byte of a fresh copy of the store and runs in a forked child (so a SIGBUS,
a segfault or a hang is counted, not suffered): open the store, verify it, and, when verify
passes, ask every question the store answers (every record by seq and by id, every index scan,
braid heads, counts, idempotent retries of stored deltas, one new append, verify again) and
compare with the answers of the intact store. The flips are seeded (BRAIDLOG_SEED) and aimed:
uniformly over the file, at record bytes, at branch pages, at index pages and at meta pages.
The outcome counts are printed (run with -s); docs/operations.md gives those of a full run.
"""

from __future__ import annotations

import collections
import os
import random
import shutil
import struct
import sys

import pytest

from braidlog import BraidlogError, LmdbLog, Refs, Vector
from braidlog.lmdb.file import picked, read_metas
from tests.support import in_child, make_delta

pytestmark = pytest.mark.slow

N_DELTAS = 2000
TRIALS = {"uniform": 60, "record": 60, "branch": 60, "index": 80, "meta": 40}
TIMEOUT = 30.0
GOOD = {"no effect", "refused at open", "found by verify"}
_E = "<" if sys.byteorder == "little" else ">"


def _deltas() -> list:
    out = []
    for i in range(N_DELTAS):
        kind = ("message", "observation", "tick", "tool_call")[i % 4]
        payload = {"message": {"text": f"message {i} " + "m" * (i % 50)},
                   "observation": {"text": "seen", "data": {"n": i}},
                   "tick": {}, "tool_call": {"tool": "search", "args": {"q": str(i)}}}[kind]
        refs = Refs(deltas=(f"E{i % 11}",), knots=(f"K{i % 5}",)) if i % 3 == 0 else None
        vector = Vector.of([float(i % 7), 1.0, 0.5, -1.0]) if i % 50 == 0 else None
        out.append(make_delta(i, braid=f"agent-{i % 6}", kind=kind, payload=payload, refs=refs,
                              vector=vector))
    return out


def _answers(log: LmdbLog, deltas: list) -> dict:
    """Every answer the store gives about its deltas (compared between intact and flipped)."""
    head = log.head()
    out = {"head": head, "records": [(r.seq, r.hash, r.delta) for r in
                                     (log.read(s) for s in range(1, head.seq + 1))]}
    out["by id"] = [(log.seq_of(d.id), log.get(d.id).seq) for d in deltas]
    braids = sorted({d.braid_id for d in deltas})
    out["braids"] = log.braids()
    out["braid scans"] = {b: [r.seq for r in log.scan_braid(b)] for b in braids}
    out["braid heads"] = {b: log.braid_head(b) for b in braids}
    out["kind scans"] = {k: [r.seq for r in log.scan_kind(k, reverse=True)]
                         for k in ("message", "observation", "tick", "tool_call")}
    out["ref scans"] = {e: [r.seq for r in log.scan_refs(e)] for e in
                        [f"E{i}" for i in range(11)] + [f"K{i}" for i in range(5)]}
    out["counts"] = (log.counts("braid"), log.counts("kind"))
    out["spaces"] = log.spaces()
    return out


def _trial(path: str, deltas: list, truth: dict) -> str:
    """The outcome of one flipped store; runs in a forked child."""
    try:
        log = LmdbLog(path)
    except BraidlogError:
        return "refused at open"
    try:
        try:
            log.verify()
        except BraidlogError:
            return "found by verify"
        try:
            got = _answers(log, deltas)
            retried = log.append_batch(deltas[::97])
            after = log.head()
            new = log.append(make_delta(N_DELTAS + 1, braid="agent-new"))
            log.verify()
        except BraidlogError as e:
            return f"silent wrong answer: verify passed, then {type(e).__name__}: {e}"
        for key, value in truth.items():
            if got[key] != value:
                return f"silent wrong answer: verify passed, {key} differ"
        if retried != [truth["by id"][i][0] for i in range(0, N_DELTAS, 97)] \
                or after != truth["head"] or new != truth["head"].seq + 1:
            return "silent wrong answer: verify passed, a retry or an append went wrong"
        return "no effect"
    finally:
        log.close()


# -- where the bytes are ------------------------------------------------------------------------

def _pages(path) -> tuple[int, int, dict[int, tuple[str, str]]]:
    """(page size, page-header size, {pgno: (table, "branch" | "leaf")}) of every page reachable
    from the committed meta, dup subtrees included."""
    with open(path, "rb") as f:
        data = f.read()
    hdr, m0, m1 = read_metas(os.open(path, os.O_RDONLY))
    assert hdr == 16, "these aims know LMDB 0.9's page layout"
    meta = picked(m0, m1)
    psize = meta.psize
    pages: dict[int, tuple[str, str]] = {}

    def u16(off):
        return struct.unpack_from(_E + "H", data, off)[0]

    def walk(pgno: int, table: str, dupsort: bool) -> list[tuple[bytes, int]]:
        base = pgno * psize
        flags, lower = u16(base + 10), u16(base + 12)
        nodes = [base + u16(base + 16 + 2 * i) for i in range((lower - 16) >> 1)]
        if flags & 0x01:
            pages[pgno] = (table, "branch")
            for n in nodes:
                lo, hi, fl = struct.unpack_from(_E + "HHH", data, n)
                walk(lo | hi << 16 | fl << 32, table, dupsort)
            return []
        pages[pgno] = (table, "leaf")
        subs = []
        for n in nodes:
            lo, hi, fl, ks = struct.unpack_from(_E + "HHHH", data, n)
            if fl & 0x02:  # a named table (in main) or a dup subtree (in a dupsort table)
                root = struct.unpack_from(_E + "Q", data, n + 8 + ks + 40)[0]
                subs.append((data[n + 8:n + 8 + ks], root))
        if dupsort:
            for _, root in subs:
                walk(root, table, False)
        return subs

    for name, root in walk(meta.main.root, "main", False):
        dupsort = name in (b"braid", b"kind", b"refs")
        if root != (1 << 64) - 1:
            walk(root, name.decode(), dupsort)
    return psize, hdr, pages


def _aims(path, rng: random.Random) -> list[tuple[str, int]]:
    psize, hdr, pages = _pages(path)
    size = os.path.getsize(path)
    log_leaves = [p for p, (t, k) in pages.items() if t == "log" and k == "leaf"]
    branches = [p for p, (t, k) in pages.items() if k == "branch"]
    indexes = [p for p, (t, _) in pages.items() if t in ("ids", "idh", "braid", "kind", "refs",
                                                         "spaces")]
    assert log_leaves and branches and indexes
    with open(path, "rb") as f:
        data = f.read()

    def in_page(pgno: int, used_only: bool) -> int:
        base = pgno * psize
        if not used_only:
            return base + rng.randrange(psize)
        lower, upper = struct.unpack_from(_E + "HH", data, base + 12)
        return base + rng.randrange(upper, psize)  # the nodes: keys and values

    aims = []
    for kind, n in TRIALS.items():
        for _ in range(n):
            if kind == "uniform":
                at = rng.randrange(size)
            elif kind == "record":
                at = in_page(rng.choice(log_leaves), True)
            elif kind == "branch":
                at = in_page(rng.choice(branches), rng.random() < 0.8)
            elif kind == "index":
                at = in_page(rng.choice(indexes), rng.random() < 0.8)
            else:
                at = rng.choice((0, psize)) + rng.randrange(hdr + 136)
            aims.append((kind, at))
    return aims


#: The seed of the default run; BRAIDLOG_SEED=N runs another. The store's delta ids are new ULIDs
#: each run, so its pages (and where an aimed flip lands) differ from run to run anyway.
DEFAULT_SEED = 1


@pytest.fixture
def flips_rng():
    seed = int(os.environ.get("BRAIDLOG_SEED", DEFAULT_SEED))
    print(f"\n[seed] BRAIDLOG_SEED={seed} reproduces the byte flips")
    return random.Random(seed)


def test_single_byte_flips_are_harmless_refused_or_found(tmp_path, flips_rng):
    rng = flips_rng
    pristine = tmp_path / "pristine"
    deltas = _deltas()
    with LmdbLog(pristine, durable=False) as log:
        for i in range(0, N_DELTAS, 250):
            log.append_batch(deltas[i:i + 250])
        truth = _answers(log, deltas)
        truth_head = log.head()
    assert truth_head.seq == N_DELTAS
    data = pristine / "data.mdb"
    outcomes: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    bad = []
    for n, (kind, at) in enumerate(_aims(data, rng)):
        trial = tmp_path / f"trial-{n}"
        shutil.copytree(pristine, trial)
        with open(trial / "data.mdb", "r+b") as f:
            f.seek(at)
            byte = f.read(1)[0]
            f.seek(at)
            f.write(bytes([byte ^ rng.randrange(1, 256)]))
        outcome = in_child(_trial, str(trial), deltas, truth, timeout=TIMEOUT)
        shutil.rmtree(trial)
        outcomes[kind][outcome if outcome in GOOD else "BAD"] += 1
        if outcome not in GOOD:
            bad.append((kind, at, outcome))
    table = {kind: dict(c) for kind, c in outcomes.items()}
    total = sum((c for c in outcomes.values()), collections.Counter())
    print(f"\nbyte flips of a {N_DELTAS}-delta store ({os.path.getsize(data):,} bytes): {table}; "
          f"total {dict(total)}")
    assert not bad, f"{len(bad)} flips ended badly (aim, offset, outcome): {bad[:10]}"
