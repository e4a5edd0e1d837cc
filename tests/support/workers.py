"""Subprocess bodies for crash and multi-process tests: ``python -m tests.support.workers NAME ...``."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta

from ulid import ULID

from braidlog import GenericDelta, LmdbLog, Provenance, StorageError
from tests.support import ROOT, T0


def spawn(*args: str) -> subprocess.Popen:
    """``python -m tests.support.workers *args`` from the repository's root, its output piped."""
    return subprocess.Popen([sys.executable, "-m", "tests.support.workers", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def refused_in_child(opener: Callable[[], object], says: str) -> bool:
    """Fork; in the child ``opener()`` must raise StorageError saying ``says``: whether it did."""
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            opener()
        except StorageError as e:
            code = 0 if says in str(e) else 2
        except BaseException:
            code = 4
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def planned(seed: int, n_batches: int) -> list[list[GenericDelta]]:
    """The batches a crash-test writer attempts, reproducible from the seed."""
    rng = random.Random(seed)
    batches, i = [], 0
    for _ in range(n_batches):
        batch = []
        for _ in range(rng.randrange(1, 40)):
            batch.append(GenericDelta(
                id=str(ULID.from_bytes(rng.randbytes(16))), braid_id=f"b{rng.randrange(3)}",
                kind="message", ts=T0 + timedelta(milliseconds=i), provenance=Provenance("user"),
                confidence=1.0, payload={"text": f"delta {i} " + "x" * rng.randrange(300)}))
            i += 1
        batches.append(batch)
    return batches


def writer(path: str, seed: str, n_batches: str, durable: str = "True") -> None:
    """Append the planned batches; print "ack K" after batch K commits (and is durable:
    ``durable`` is True or wal)."""
    log = LmdbLog(path, durable=durable if durable == "wal" else True)
    for k, batch in enumerate(planned(int(seed), int(n_batches))):
        log.append_batch(batch)
        print(f"ack {k}", flush=True)
    print("done", flush=True)


def appender(path: str, seconds: str) -> None:
    """Append small batches for a while (for reader tests)."""
    log = LmdbLog(path, durable=False)
    end = time.monotonic() + float(seconds)
    i = 0
    while time.monotonic() < end:
        log.append_batch([GenericDelta(braid_id=f"b{j % 3}", kind="message", ts=T0 + timedelta(seconds=i),
                                       provenance=Provenance("user"), confidence=1.0,
                                       payload={"text": f"m{i}-{j}"}) for j in range(20)])
        i += 1
    print(log.head().seq, flush=True)


def reader(path: str, seconds: str) -> None:
    """Repeatedly check that what it reads is one consistent, growing prefix of the chain."""
    log = LmdbLog(path, readonly=True)
    end = time.monotonic() + float(seconds)
    last = 0
    checks = 0
    while time.monotonic() < end:
        head = log.head()
        assert head.seq >= last, (head, last)
        assert log.verify(1, head.seq + 1) == head
        seen = sum(v.version for v in log.braids().values())
        assert seen >= head.seq
        last = head.seq
        checks += 1
    print(f"{checks} {last}", flush=True)


if __name__ == "__main__":
    {"writer": writer, "appender": appender, "reader": reader}[sys.argv[1]](*sys.argv[2:])
