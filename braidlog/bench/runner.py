"""A run: every configured workload ``repeat`` times, braidlog and its peers interleaved inside
each repeat, then the rows, the targets and the machine facts in one report."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from functools import partial

from ..braid import Braid
from ..delta import encode
from ..errors import ValidationError
from . import erase, eventsourcing, langgraph, reads, recall, recall_quality, replication, scaling, writes
from .data import AgentSession
from .harness import WORKLOADS, Config, Run, Sample, Step, no_detail
from .machine import load as load_now
from .machine import machine_facts
from .peers import EventsourcingApp
from .report import TARGETS, Report, aggregate, check

__all__ = ["run"]

_RUNNERS: dict[str, Callable[[Run], list[Sample]]] = {
    **writes.RUNNERS, **reads.RUNNERS, "recall": recall.run_workload, **scaling.RUNNERS,
    "recall_quality": recall_quality.run_workload,
    "langgraph": langgraph.run_workload, "eventsourcing": eventsourcing.run_workload,
    "replication": replication.run_workload, "erase": erase.run_workload}
# timed steps per repeat, for the progress bar
_STEPS = {**writes.STEPS, **reads.STEPS, "recall": recall.STEPS, **scaling.STEPS,
          "recall_quality": recall_quality.STEPS,
          "langgraph": langgraph.TIMED_STEPS, "eventsourcing": eventsourcing.TIMED_STEPS,
          "replication": replication.STEPS, "erase": erase.STEPS}
assert set(_RUNNERS) == set(_STEPS) == set(WORKLOADS)


def run(config: Config, *, step: Step | None = None,
        total: Callable[[int], None] | None = None, detail: Step | None = None) -> Report:
    """Run the configured workloads ``repeat`` times; ``step(label)`` is called before each
    timed part (for progress), ``total(n)`` once with the number of steps to expect, and
    ``detail(label)`` as an untimed step that takes long (building a log) gets on."""
    started = time.perf_counter()
    if config.dir is not None:
        try:
            os.makedirs(config.dir, exist_ok=True)  # a --dir not made yet is made, as mkdir -p does
        except OSError as e:
            raise ValidationError("dir", f"cannot make the directory {config.dir} for the bench's "
                                  f"stores ({e.strerror}); give a directory you can write to") from None
    root = tempfile.mkdtemp(prefix="braidlog-bench-", dir=config.dir)
    session = AgentSession(config.seed, entities=config.entities)
    r = Run(config, root, step or _quiet, session, detail=detail or no_detail)
    if total is not None:
        steps = sum(_STEPS[w] for w in config.only if w != "scaling") * config.repeat
        if "scaling" in config.only:
            steps += len(config.scaling_sizes) * (config.repeat if scaling.repeats(config) else 1)
        total(steps + 2)
    samples: list[tuple[Sample, int]] = []
    try:
        machine = machine_facts(root)
        for rep in range(config.repeat):
            prefix = f"[{rep + 1}/{config.repeat}] "
            r.step = partial(_prefixed, step or _quiet, prefix)
            r.detail = partial(_prefixed, detail or no_detail, prefix)
            for w in config.only:
                samples.extend((s, rep) for s in _RUNNERS[w](r))
    finally:
        for value in r.cache.values():
            if isinstance(value, (Braid, EventsourcingApp)):
                value.close()
            elif isinstance(value, dict) and "log" in value:
                value["log"].close()
        shutil.rmtree(root, ignore_errors=True)
    machine["load_end"] = load_now()
    rows, by_key = aggregate(samples)
    targets = [check(t, by_key, config.size) for t in TARGETS]
    cfg = {k: v for k, v in vars(config).items()}
    cfg["only"] = list(config.only)
    cfg["mix"] = session.mix
    cfg["payload_bytes_mean"] = _mean_bytes(session)
    cfg["projections"] = r.cache.get("replay:projections", [])
    return Report(machine=machine, config=cfg, rows=rows, targets=targets,
                  skipped=sorted(set(r.skipped)), seconds=time.perf_counter() - started)


def _prefixed(say: Callable[[str], None], prefix: str, label: str) -> None:
    """``say(prefix + label)``: a repeat's steps named with their repeat."""
    say(prefix + label)


def _quiet(label: str) -> None:
    pass


def _mean_bytes(session: AgentSession) -> float:
    ds = session.deltas(500)
    return round(sum(len(encode(d)) for d in ds) / len(ds), 1)

