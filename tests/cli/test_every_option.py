"""Every command and option of the shell, given arbitrary values, ends in an exit code: 0, a
one-line error (1) or a usage error (2), never a traceback, and a command that failed wrote
nothing to the store.

The commands and options are ENUMERATED from the parser (``braidlog.cli.build_parser``), so a new
command or option is fuzzed without anyone listing it. Each command runs in-process
(``braidlog.cli.main``) on a small store, in the test's directory, with no standard input.
Left out, each for a stated reason: ``--app`` (it imports the module it names), the commands
that serve until stopped or need a NATS server (``SERVES``), and ``bench`` (minutes of work);
their arguments are tested by their own suites.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import braidlog
from braidlog import Refs
from braidlog.cli import _leaves, build_parser, main

EXAMPLES = int(os.environ.get("BRAIDLOG_PROPERTY_EXAMPLES", "6"))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, database=None, phases=[Phase.generate],
                    derandomize=os.environ.get("BRAIDLOG_PROPERTY_RANDOM") is None,
                    suppress_health_check=list(HealthCheck))
T0 = datetime(2026, 1, 1, tzinfo=UTC)

#: Commands that serve until stopped, or talk to a NATS server (tests/mcp, tests/replication).
SERVES = {"mcp", "ship", "replica", "promote", "sync-append", "bench"}
#: Options never drawn: --app imports the module it names; --serve serves until stopped.
NEVER = {"--app", "--store", "--serve", "-h", "--help"}


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every command's parser by its words (``kind add``), from the parser itself."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out: dict[str, argparse.ArgumentParser] = {}
    for leaf in _leaves(sub):
        words = leaf.prog.split()[1:]  # "braidlog kind add" -> ["kind", "add"]
        out[" ".join(words)] = leaf
    return out


def _safe(s: str) -> bool:
    return "/" not in s and "\\" not in s and s not in (".", "..") and not s.startswith(("~", "-"))


texts = st.text(max_size=12).filter(_safe) | st.sampled_from(
    ["", "0", "1", "-1", "3", "99999999999999999999", "1e400", "nan", "abc", "b1", "message", "\ud800",
     "2026-01-01T00:00:00+00:00", "2026-01-01", "1:" + "00" * 32, "x" * 300, "a\x00b", "{}", "[1]",
     "01ARZ3NDEKTSV4RRFFQ69G5FAV"])


def _value(action: argparse.Action) -> st.SearchStrategy[str]:
    if action.choices:
        return st.sampled_from([str(c) for c in action.choices]) | texts
    return texts


def argv_for(action_list: list[argparse.Action]) -> st.SearchStrategy[list[str]]:
    """Arguments for one command: each option present or not, with a value when it takes one;
    positionals always given."""
    parts: list[st.SearchStrategy[list[str]]] = []
    for a in action_list:
        if a.option_strings:
            flag = next((o for o in a.option_strings if o.startswith("--")), a.option_strings[0])
            if flag in NEVER or isinstance(a, argparse._HelpAction):
                continue
            if a.nargs == 0:
                parts.append(st.sampled_from([[], [flag]]))
            else:
                parts.append(st.just([]) | _value(a).map(lambda v, f=flag: [f"{f}={v}"]))
        elif a.nargs in ("?", "*"):
            parts.append(st.just([]) | _value(a).map(lambda v: [v]))
        elif isinstance(a.nargs, int):
            parts.append(st.lists(_value(a), min_size=a.nargs, max_size=a.nargs))
        else:
            parts.append(_value(a).map(lambda v: [v]))
    return st.tuples(*parts).map(lambda ps: [x for p in ps for x in p])


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    root = tmp_path_factory.mktemp("every-option")
    store = root / "store"
    with braidlog.open(store, projections=[]) as b:
        first = b.append(braidlog.delta("b1", "message", {"text": "hello there"}, ts=T0))
        said = b.log.read(first).delta
        b.append(braidlog.delta("b1", "observation", {"text": "it rains"}, ts=T0, refs=Refs(deltas=(said.id,))))
    return root, str(store)


def _head(store: str) -> object:
    with braidlog.LmdbLog(store, create=False, readonly=True) as log:
        return log.head()


CASES = sorted(c for c in commands() if c.split()[0] not in SERVES)


@pytest.mark.parametrize("command", CASES)
def test_every_option_ends_in_an_exit_code_and_a_failure_writes_nothing(home, command, monkeypatch, capsys):
    root, store = home
    monkeypatch.chdir(root)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    monkeypatch.setenv("COLUMNS", "80")
    parser = commands()[command]

    @PROPERTY
    @given(args=argv_for([a for a in parser._actions if a.dest != "help"]))
    def check(args: list[str]) -> None:
        before = _head(store)
        try:
            code = main(["--store", store, *command.split(), *args])
        except SystemExit as e:  # argparse's usage error: exit 2, one line on stderr
            assert e.code in (0, 2), (command, args, e.code)
            code = e.code
        finally:
            capsys.readouterr()
        assert code in (0, 1, 2), (command, args, code)
        if code:
            assert _head(store) == before, f"{command} {args} failed but wrote"

    check()


def test_the_parser_is_enumerated():
    found = commands()
    assert {"append", "log", "kind add", "history", "erase", "recall"} <= set(found)
    assert set(found) - set(CASES) <= {c for c in found if c.split()[0] in SERVES}
