"""The machine a run measured: cores, CPU, memory, Python, library versions, and the storage
under the run's directory with its fsync latency."""

from __future__ import annotations

import contextlib
import os
import platform
import sqlite3
import statistics
import time
from typing import Any

import lmdb

__all__ = ["machine_facts", "load", "fsync_ms"]

def machine_facts(path: str) -> dict[str, Any]:
    """Cores, CPU, memory, Python, library versions and the storage under ``path``."""
    facts: dict[str, Any] = {
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu": _cpu_model(),
        "memory_gib": _memory_gib(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "versions": _versions(),
        "storage": _storage(path),
        "load": load(),  # the 1, 5 and 15 minute load averages as the run starts
    }
    return facts


def load() -> list[float] | None:
    """The 1, 5 and 15 minute load averages, or None where the system has none."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for dist in ("braidlog", "lmdb", "msgspec", "blake3", "python-ulid", "numpy", "hnswlib", "tantivy",
                 "rich", "eventsourcing"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
            if dist == "hnswlib":  # the same module, built as wheels (see the recall extra)
                with contextlib.suppress(metadata.PackageNotFoundError):
                    out[dist] = f"{metadata.version('chroma-hnswlib')} (chroma-hnswlib)"
    out["liblmdb"] = ".".join(map(str, lmdb.version()))
    out["sqlite"] = sqlite3.sqlite_version
    return out


def _storage(path: str) -> dict[str, Any]:
    real = os.path.realpath(path)
    best = ("", "?", "?")
    try:
        with open("/proc/mounts") as f:
            for line in f:
                dev, mount, fstype = line.split()[:3]
                if (real == mount or real.startswith(mount.rstrip("/") + "/")) and len(mount) > len(best[0]):
                    best = (mount, fstype, dev)
    except OSError:
        pass
    out: dict[str, Any] = {"path": real, "mount": best[0] or None, "filesystem": best[1],
                           "device": best[2]}
    name = os.path.basename(best[2])
    for candidate in (name, name.rstrip("0123456789"), name.rstrip("0123456789").rstrip("p")):
        try:
            with open(f"/sys/block/{candidate}/queue/rotational") as f:
                out["rotational"] = f.read().strip() == "1"
            break
        except OSError:
            continue
    out["fsync_ms_p50"] = fsync_ms(path)
    return out


def fsync_ms(path: str, n: int = 30) -> float:
    """Median time of a 4 KiB write plus fsync under ``path``: the floor of a durable commit."""
    fname = os.path.join(path, "fsync.probe")
    lat = []
    fd = os.open(fname, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        block = os.urandom(4096)
        for i in range(n):
            t = time.perf_counter()
            os.pwrite(fd, block, i * 4096)
            os.fsync(fd)
            lat.append(time.perf_counter() - t)
    finally:
        os.close(fd)
        os.unlink(fname)
    return round(statistics.median(lat) * 1000, 3)

