"""Every `braidlog` subcommand has help, and a section with an example in docs/cli.md.

The rules for docs/cli.md: each command has a heading ``## `braidlog NAME` `` (any level from 2
to 4); its section says what the command does in prose, names every option of the command, and
holds an example: a console block with a ``$ braidlog … NAME …`` line that the real parser
accepts. A section for a command that does not exist fails too.
"""

from __future__ import annotations

import argparse
import re
import shlex

import pytest

from braidlog.cli import build_parser
from tests.support import ROOT

CLI_MD = ROOT / "docs" / "cli.md"
HEADING = re.compile(r"^(#{2,4}) `braidlog ([a-z][a-z0-9-]*)`\s*$")


def subcommands() -> dict[str, tuple[argparse.ArgumentParser, str]]:
    """Every subcommand of the real parser: name -> (its parser, its one-line help)."""
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in action._choices_actions}
    return {name: (sub, helps.get(name) or "") for name, sub in action.choices.items()}


def sections(text: str) -> dict[str, str]:
    """The docs sections by command name: the text from its heading to the next heading (a line
    inside a fenced block, such as a table's ``#  seq`` header, is not a heading)."""
    out: dict[str, str] = {}
    name, level, body = None, 0, []
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        m = None if fenced else HEADING.match(line)
        heading = None if fenced else re.match(r"^(#{1,6}) ", line)
        if heading and name is not None and len(heading.group(1)) <= level:
            out[name] = "\n".join(body)
            name = None
        if m:
            name, level, body = m.group(2), len(m.group(1)), []
        elif name is not None:
            body.append(line)
    if name is not None:
        out[name] = "\n".join(body)
    return out


def examples(section: str) -> list[list[str]]:
    """``$ braidlog …`` lines inside fenced console/sh blocks, split as a shell would."""
    found, inside = [], False
    for line in section.splitlines():
        if line.startswith("```"):
            inside = not inside and line.strip() in ("```console", "```sh", "```shell", "```bash")
            continue
        if inside and line.startswith("$ braidlog"):
            found.append(_argv(line[2:]))
    return found


def _argv(command: str) -> list[str]:
    """The arguments of a shell command line, up to a redirection, pipe or comment."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = []
    for word in lexer:
        if word[0] in "<>|;&#":
            break
        words.append(word)
    return words[1:]


#: Options every command takes, documented once at the top of docs/cli.md.
GLOBAL = {"--store", "--app"}


def options(sub: argparse.ArgumentParser) -> list[str]:
    """The options a command shows in its help (hidden ones and the global ones aside)."""
    return [max(a.option_strings, key=len) for a in sub._actions
            if a.option_strings and "-h" not in a.option_strings and a.help != argparse.SUPPRESS
            and max(a.option_strings, key=len) not in GLOBAL]


COMMANDS = subcommands()
DOCS = sections(CLI_MD.read_text(encoding="utf-8")) if CLI_MD.exists() else {}


def test_docs_cli_md_exists():
    assert CLI_MD.exists(), "docs/cli.md is missing"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_help(name):
    sub, short = COMMANDS[name]
    assert short.strip(), f"`braidlog {name}` has no help line"
    assert (sub.description or "").strip(), f"`braidlog {name}` has no description"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_a_section_with_an_example(name):
    assert name in DOCS, f"docs/cli.md has no section '## `braidlog {name}`'"
    section = DOCS[name]
    prose = [ln for ln in section.splitlines() if ln.strip() and not ln.startswith(("```", "$", "|"))]
    assert prose, f"the section of `braidlog {name}` says nothing about what it does"
    runs = [argv for argv in examples(section) if name in argv]
    assert runs, f"the section of `braidlog {name}` has no example `$ braidlog ... {name} ...`"
    parser = build_parser()
    for argv in runs:
        try:
            args = parser.parse_args(argv)
        except SystemExit:
            pytest.fail(f"the example `braidlog {' '.join(argv)}` does not parse")
        assert args.command == name
    sub, _ = COMMANDS[name]
    missing = [opt for opt in options(sub) if opt not in section]
    assert not missing, f"the section of `braidlog {name}` does not mention {missing}"


def test_docs_describe_only_commands_that_exist():
    stale = sorted(set(DOCS) - set(COMMANDS))
    assert not stale, f"docs/cli.md documents commands that do not exist: {stale}"


def test_the_checker_catches_a_missing_example():
    text = "## `braidlog head`\n\nPrints the head.\n\n```console\n$ braidlog log\n```\n"
    assert sections(text) == {"head": "\nPrints the head.\n\n```console\n$ braidlog log\n```"}
    assert [a for a in examples(sections(text)["head"]) if "head" in a] == []
    assert examples("```console\n$ braidlog --store s.lmdb head --json  # note\n```") == [
        ["--store", "s.lmdb", "head", "--json"]]
    assert examples("```sh\n$ braidlog append --json < more.jsonl\n$ braidlog export - | gzip\n```") == [
        ["append", "--json"], ["export", "-"]]
