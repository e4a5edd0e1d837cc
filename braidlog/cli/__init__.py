"""The ``braidlog`` command. Each subcommand wraps one library call.

Command groups live in modules of this package, each with ``register(subparsers)`` adding its
subcommands; a subcommand's handler takes ``(args, out)`` and returns an exit code. Errors are
one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import BraidlogError

__all__ = ["main", "build_parser", "GROUPS"]

#: Modules of this package that add subcommands, in help order.
GROUPS = ("core",)
OPTIONAL_GROUPS = ("audit", "kind_cmd", "recall_cmd", "bench_cmd", "replica_cmd", "proofs_cmd", "erase_cmd",
                   "mcp_cmd", "context_cmd")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command; given ``argv`` whose command is one of the core group's,
    only that group is loaded (the other groups import audit, transfer, bench and their peers,
    which would double the start-up of ``braidlog head``)."""
    parser = argparse.ArgumentParser(
        prog="braidlog",
        description="An embedded, append-only, hash-chained event log for agent memory.",
        epilog="The store is ./braid.lmdb unless --store or BRAIDLOG_STORE names another.",
    )
    parser.add_argument("--version", action="version", version=f"braidlog {_version()}",
                        help="print braidlog's version and exit")
    parser.add_argument("--store", default=os.environ.get("BRAIDLOG_STORE", "braid.lmdb"),
                        help="the store directory (default: $BRAIDLOG_STORE or ./braid.lmdb)")
    parser.add_argument("--app", action="append", default=None, metavar="MODULE",
                        help="an application module whose kinds and PROJECTIONS to load "
                        "(repeat for more; default: $BRAIDLOG_APP, comma-separated)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    word = _command_word(argv) if argv is not None else None
    for name in GROUPS + OPTIONAL_GROUPS:
        if word is not None and name not in GROUPS and word in sub.choices:
            break
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            continue
        module.register(sub)
    for command in _leaves(sub):  # --store and --app also after the command: head --store X
        command.add_argument("--store", default=argparse.SUPPRESS, metavar="PATH",
                             help="the store directory, here or before the command "
                             "(default: $BRAIDLOG_STORE or ./braid.lmdb)")
        command.add_argument("--app", action="append", default=argparse.SUPPRESS, metavar="MODULE",
                             help="an application module to load, here or before the command "
                             "(default: $BRAIDLOG_APP)")
    return parser


def _version() -> str:
    from .. import __version__

    return __version__


def _command_word(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names, or None when an option comes first (``--help``)."""
    args = iter(argv)
    for arg in args:
        if arg == "--store":
            next(args, None)
        elif not arg.startswith("--store="):
            return None if arg.startswith("-") else arg
    return None


def _leaves(sub: Any) -> list[argparse.ArgumentParser]:
    """Every command parser under ``sub``, down to those of a command's own actions
    (``braidlog kind add``)."""
    out = []
    for command in dict.fromkeys(sub.choices.values()):
        nested = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
        out += [leaf for a in nested for leaf in _leaves(a)] if nested else [command]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    if hasattr(signal, "SIGPIPE"):  # `braidlog log --json | head` ends quietly, as Unix tools do
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args, sys.stdout) or 0)
    except BraidlogError as e:
        print(f"braidlog: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            where = f" writing {e.filename}" if e.filename else ""
            print(f"braidlog: error: disk full{where} ({e.strerror}): free space on that disk or "
                  "write somewhere else", file=sys.stderr)
        else:
            print(f"braidlog: error: {e}", file=sys.stderr)
        return 1
    except ValueError as e:
        print(f"braidlog: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("braidlog: interrupted", file=sys.stderr)
        return 130
