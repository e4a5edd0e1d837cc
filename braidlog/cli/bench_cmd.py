"""``braidlog bench``: braidlog and its peers measured side by side on this machine, in one run."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import IO, Any

from .. import bench
from ..errors import ValidationError
from .util import console, json_flag, write_json


def register(sub: Any) -> None:
    p = sub.add_parser(
        "bench", help="measure braidlog against raw LMDB, sqlite3 and eventsourcing here",
        description="Time realistic agent workloads (batched and single durable appends, "
        "concurrent appenders with and without group commit, scan and verify, replay, time "
        "travel, recall) on braidlog and on every installed peer, with identical data, and "
        "print each figure as the median and spread of repeated runs with its ratio to "
        "braidlog. Peers: raw LMDB (the ceiling), sqlite3, and the eventsourcing library "
        "(pip install '.[bench]'). docs/benchmarks.md explains how to read the table.")
    p.add_argument("--quick", action="store_true",
                   help="small sizes and 3 repeats: about three minutes on a 2-core machine")
    json_flag(p, "the full report as JSON on stdout")
    p.add_argument("--size", type=int, default=None, metavar="N",
                   help="deltas in the append, scan, replay and time-travel logs "
                   "(default 100,000; 5,000 with --quick)")
    p.add_argument("--seed", type=int, default=7, metavar="S",
                   help="seed of the generated workload (default 7)")
    p.add_argument("--repeat", type=int, default=None, metavar="R",
                   help="repeats of every workload (default 5; 3 with --quick; 1 from --size 500000)")
    p.add_argument("--only", action="append", default=None, metavar="WORKLOAD",
                   help=f"run only these workloads (repeatable or comma-separated): "
                   f"{', '.join(bench.WORKLOADS)}")
    p.add_argument("--recall-size", type=int, default=None, metavar="N",
                   help="vectors in the recall workload (default: --size, at most 20,000); "
                   "e.g. 1000000 with --recall-dim 128, or 200000 with --recall-dim 384")
    p.add_argument("--recall-dim", type=int, default=128, metavar="D",
                   help="dimensions of the recall workload's vectors (default 128)")
    p.add_argument("--scaling-sizes", default=None, metavar="N,N,...",
                   help="log sizes of the scaling curves (default a hundredth, 3%%, a tenth, 30%% "
                   "and all of --size; with --quick a fifth, half and all of it)")
    p.add_argument("--report", default=None, metavar="DIR",
                   help="also write DIR/index.html, a self-contained page with the charts "
                   "(throughput, latency percentiles, scaling curves, targets), and "
                   "DIR/report.json; needs matplotlib (pip install '.[bench]')")
    p.add_argument("--compare", default=None, metavar="OLD.json",
                   help="show each figure against an earlier run: its report.json (or its "
                   "directory), or what --json printed")
    p.add_argument("--dir", default=None, metavar="PATH",
                   help="where the temporary stores go (default: the system's temp dir); "
                   "the storage under it is part of what is measured")
    p.set_defaults(handler=cmd_bench)


def cmd_bench(args: Any, out: IO[str]) -> int:
    only = None
    if args.only:
        only = [w.strip() for item in args.only for w in item.split(",") if w.strip()]
    sizes = None
    if args.scaling_sizes is not None:
        try:
            sizes = [int(x.replace("_", "")) for x in args.scaling_sizes.split(",") if x.strip()]
        except ValueError:
            raise ValidationError("scaling-sizes", f"must be sizes separated by commas, e.g. "
                                  f"10000,100000, not {args.scaling_sizes!r}") from None
    config = bench.Config.make(quick=args.quick, size=args.size, seed=args.seed,
                               repeat=args.repeat, only=only, dir=args.dir,
                               recall_size=args.recall_size, recall_dim=args.recall_dim,
                               scaling_sizes=sizes)
    old = bench.load(args.compare) if args.compare is not None else None  # before the run: fail fast
    if args.report is not None:
        _drawing()
    with _progress() as (step, total, detail):
        report = bench.run(config, step=step, total=total, detail=detail)
    if args.json:
        write_json(out, report)
    else:
        bench.render(report, console(out, markup=True), compare=old)
    if args.report is not None:
        from ..bench import html

        page = html.write(report, args.report, compare=old)
        print(f"braidlog bench: the report is {page}", file=sys.stderr)
    return 0


def _drawing() -> None:
    """matplotlib is there, or a one-line error before anything is measured."""
    try:
        import matplotlib  # noqa: F401  (only whether it is installed)
    except ImportError:
        raise ValidationError("report", "needs matplotlib to draw its charts: pip install "
                              "'braidlog[bench]'") from None


@contextlib.contextmanager
def _progress() -> Iterator[tuple[Callable[[str], None], Callable[[int], None] | None, Callable[[str], None]]]:
    """A rich progress bar on a terminal; plain lines on stderr otherwise (logs, CI)."""
    if not sys.stderr.isatty():
        def step(label: str) -> None:
            print(f"braidlog bench: {label}", file=sys.stderr, flush=True)

        yield step, None, step
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("braidlog bench", total=None)

        def step(label: str) -> None:
            bar.update(task, description=label, advance=1)

        def total(n: int) -> None:
            bar.update(task, total=n)

        def detail(label: str) -> None:
            bar.update(task, description=label)

        yield step, total, detail
