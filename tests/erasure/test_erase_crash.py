"""A process SIGKILLed at any point of an erasure leaves the store as it was or erased, never
half, and never any of the erased text in the erased state (real processes, real kills)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time

import pytest

import braidlog
from tests.support import make_delta
from tests.support.forgetting import files_holding

pytestmark = pytest.mark.slow

N_OTHER = 6000
N_ALICE = 300
SECRET = "zanzibar-secret-"

ERASE = """
import sys, braidlog
b = braidlog.open(sys.argv[1], projections=[])
print("ready", flush=True)
sys.stdin.readline()
r = b.erase(braid="alice", reason="crash test")
print("done", r.seq, flush=True)
b.close()
"""


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    path = tmp_path_factory.mktemp("crash") / "store"
    with braidlog.open(path, projections=[]) as b:
        for start in range(0, N_OTHER, 2000):
            b.append_batch([make_delta(i, braid=f"b{i % 7}", payload={"text": f"other {i} " + "y" * 40})
                            for i in range(start, start + 2000)])
        b.append_batch([make_delta(N_OTHER + i, braid="alice",
                                   payload={"text": f"{SECRET}{i:05d} " + "z" * 60})
                        for i in range(N_ALICE)])
        head = b.head()
    return path, head


def _erase_in_child(store, kill_after: float | None) -> str:
    child = subprocess.Popen([sys.executable, "-c", ERASE, str(store)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    t0 = time.perf_counter()
    child.stdin.write("go\n")
    child.stdin.flush()
    if kill_after is None:
        out = child.stdout.readline()
        child.wait(60)
        return f"{out.strip()} in {time.perf_counter() - t0:.3f}s"
    time.sleep(kill_after)
    child.send_signal(signal.SIGKILL)
    child.wait(60)
    return "killed"


def _outcome(store, head) -> str:
    with braidlog.open(store, projections=[]) as b:
        now = b.head()
        assert b.log.verify().seq == now.seq
        alice = list(b.log.scan_braid("alice"))
        if now == head:
            assert all(r.delta.erased is None for r in alice)
            return "as it was"
        assert now.seq == head.seq + 1 and b.log.hash_at(head.seq) == head.hash
        assert all(r.delta.erased is not None and r.delta.erased.by == now.seq for r in alice)
    assert files_holding(store, SECRET) == {}, "plaintext left in the erased state"
    return "erased"


def test_a_kill_at_any_point_leaves_the_old_store_or_the_erased_one(original, tmp_path):
    path, head = original
    full = tmp_path / "full"
    shutil.copytree(path, full)
    took = _erase_in_child(full, None)
    assert took.startswith("done")
    assert _outcome(full, head) == "erased"
    seconds = float(took.rsplit(" ", 1)[1][:-1])
    outcomes = {}
    for n, fraction in enumerate((0.0, 0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 1.0, 1.3)):
        store = tmp_path / f"k{n}"
        shutil.copytree(path, store)
        assert files_holding(store, SECRET)
        _erase_in_child(store, seconds * fraction)
        outcomes[fraction] = _outcome(store, head)
        with braidlog.open(store, projections=[]):
            pass
        assert not (store / ".erasing").exists()
    print(f"erase took {seconds:.3f}s; outcomes by the fraction of it before the kill: {outcomes}")
