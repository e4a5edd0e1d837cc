"""The scaling workload: one log grown step by step (a hundredth of the run's size to all of it),
and at each size the rates that should not fall as the log grows: batched append (of the step
that grew it), replay of every projection, the trivial fold, scan with decode and verify.

The log at each size is a prefix of the next one, so growing it costs one build of the largest.
It runs in every repeat while its largest log is under ``BIG`` deltas, and in the first repeat
only from there on (a million deltas take minutes), each figure then one sample.
A figure's metric names its size (``scale_metric``), which is how the report draws the curves.
"""

from __future__ import annotations

import re
import time

from ..braid import Braid
from ..lmdb.log import LmdbLog
from .data import BATCH, COUNTER, all_projections
from .harness import BIG, SCALING_SIZES, Config, Run, Sample, timed

__all__ = ["RUNNERS", "STEPS", "SERIES", "scale_metric", "scale_size", "repeats"]

#: The curves, as the systems the samples carry.
SERIES = tuple(f"braidlog · {what}" for what in (
    "batched append", "replay, every projection", "replay, trivial fold", "scan + decode", "verify"))

_METRIC = re.compile(r"^deltas/s at ([\d,]+)$")


def scale_metric(size: int) -> str:
    """The metric of a scaling figure measured at ``size`` deltas."""
    return f"deltas/s at {size:,}"


def scale_size(metric: str) -> int | None:
    """The size a scaling figure's metric names, or None for another metric."""
    m = _METRIC.match(metric)
    return int(m.group(1).replace(",", "")) if m else None


def _scaling(run: Run) -> list[Sample]:
    sizes = run.config.scaling_sizes
    if run.cache.get("scaling:done") and not repeats(run.config):
        return []
    run.cache["scaling:done"] = True
    projections, _ = all_projections()
    never = 1 << 62  # the fold alone: no checkpoint writes on the way
    out: list[Sample] = []
    W = "scaling"
    log = LmdbLog(run.path("scaling-log"), durable=False)
    try:
        have = 0
        for n in sizes:
            run.step(f"scaling · growing the log to {n:,} deltas")
            progress = run.counting(f"scaling · growing the log to {n:,}", n)
            seconds = 0.0
            for at in range(have, n, BATCH):
                chunk = run.session.deltas(min(BATCH, n - at), at)
                t = time.perf_counter()
                log.append_batch(chunk)
                seconds += time.perf_counter() - t
                progress(at + len(chunk))
            if n > have:
                out.append(_at(W, "braidlog · batched append", n, (n - have) / seconds))
            have = n
            run.detail(f"scaling · {n:,} deltas: replay, every projection")
            braid = Braid(log, projections, checkpoint_every=never)
            seconds, _ = timed(braid.rebuild)
            out.append(_at(W, "braidlog · replay, every projection", n, n / seconds))
            run.detail(f"scaling · {n:,} deltas: replay, trivial fold")
            braid = Braid(log, [COUNTER], checkpoint_every=never)
            seconds, _ = timed(braid.rebuild)
            out.append(_at(W, "braidlog · replay, trivial fold", n, n / seconds))
            run.detail(f"scaling · {n:,} deltas: scan + decode")
            seconds, _ = timed(lambda: sum(1 for _ in log.scan()))
            out.append(_at(W, "braidlog · scan + decode", n, n / seconds))
            run.detail(f"scaling · {n:,} deltas: verify")
            seconds, _ = timed(log.verify)
            out.append(_at(W, "braidlog · verify", n, n / seconds))
    finally:
        log.close()
    return out


def repeats(config: Config) -> bool:
    """Whether the curves are measured in every repeat: not once they reach BIG deltas."""
    return max(config.scaling_sizes) < BIG


def _at(workload: str, series: str, size: int, rate: float) -> Sample:
    return Sample(workload, series, scale_metric(size), rate, "/s", "higher")


RUNNERS = {"scaling": _scaling}
STEPS = {"scaling": len(SCALING_SIZES)}  # the progress bar's estimate: one step a size
