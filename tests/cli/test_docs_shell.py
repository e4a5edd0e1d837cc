"""Every shell block of README.md and docs/*.md runs, as a new user would type it.

A page's ```console, ```sh, ```shell and ```bash blocks run in order in one shell session (one
``bash``, as in a terminal: files, ``cd`` and background jobs carry over), in a fresh temporary
directory, with the installed ``braidlog`` first on PATH and no BRAIDLOG_STORE or BRAIDLOG_APP
set; the session and everything it started are ended with the page. In a console block each
``$ `` line is a command and the lines under it are what it prints: they must be what the
command prints (standard output and standard error together), line for line. A ``…`` in a
shown line stands for text left out (an id, a hash, a time); a line that is only ``…`` stands
for lines left out. So the docs either show real output or say where they abridge it. A
command must succeed unless what it shows is an error (``braidlog: error:``, or a usage
message). An ``sh`` block's lines are commands whose output is not checked; they must succeed.
A block preceded by ``<!-- no-run: why -->`` is skipped (the installation itself, which CI
runs, or servers on other machines); the page says why.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support import ROOT

SHELLS = ("console", "sh", "shell", "bash")
NO_RUN = re.compile(r"^<!--\s*no-run(:.*)?\s*-->\s*$")
TIMEOUT = 120


class Block:
    def __init__(self, page: Path, line: int, lang: str, lines: list[str]) -> None:
        self.page, self.line, self.lang, self.lines = page, line, lang, lines

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def shell_blocks(page: Path) -> list[Block]:
    """The page's shell blocks that run, in order."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        fence = lines[i].strip()
        if fence.startswith("```") and fence[3:] in SHELLS:
            j = i + 1
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            prev = next((ln for ln in reversed(lines[:i]) if ln.strip()), "")
            if not NO_RUN.match(prev.strip()):
                out.append(Block(page, i + 2, fence[3:], lines[i + 1:j]))
            i = j + 1
        else:
            i += 1
    return out


def commands(block: Block) -> list[tuple[str, list[str]]]:
    """(command, the output shown under it) of a console block."""
    found: list[tuple[str, list[str]]] = []
    for line in block.lines:
        if line.startswith("$ "):
            found.append((line[2:], []))
        elif found:
            found[-1][1].append(line)
    return found


def _pattern(shown: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if part == "…" else re.escape(part)
                              for part in re.split("(…)", shown.rstrip())) + r"\s*")


def matches(shown: list[str], actual: list[str]) -> str | None:
    """Why ``actual`` is not what the docs show (None when it is)."""
    shown = [s for s in shown if s.strip()]
    actual = [a for a in actual if a.strip()]
    i = 0
    for k, s in enumerate(shown):
        if s.strip() == "…":  # any lines left out: the next shown line may come later
            nxt = shown[k + 1] if k + 1 < len(shown) else None
            if nxt is None:
                return None
            pat = _pattern(nxt)
            while i < len(actual) and not pat.fullmatch(actual[i].rstrip()):
                i += 1
            continue
        if i >= len(actual):
            return f"the docs show {s!r}, the command printed nothing more"
        if not _pattern(s).fullmatch(actual[i].rstrip()):
            return f"the docs show {s!r}, the command printed {actual[i]!r}"
        i += 1
    if i < len(actual):
        return (f"the command printed more than the docs show, from {actual[i]!r}; "
                "end the shown output with a '…' line if it is abridged")
    return None


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("BRAIDLOG_STORE", "BRAIDLOG_APP")}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["COLUMNS"] = "200"
    return env


class Session:
    """One bash reading commands from a pipe, as a terminal would run them."""

    MARK = "__braidlog_docs_status__"

    def __init__(self, cwd: Path) -> None:
        self.proc = subprocess.Popen(["bash", "--norc", "--noprofile"], cwd=cwd, env=_env(),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, bufsize=1,
                                     start_new_session=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def run(self, command: str) -> tuple[int, list[str]]:
        """Run one command line (stdin from /dev/null); its exit status and what it printed."""
        self.proc.stdin.write(f"{{ {command}\n}} < /dev/null\necho {self.MARK} $?\n")
        self.proc.stdin.flush()
        out: list[str] = []
        while True:
            try:
                line = self.lines.get(timeout=TIMEOUT)
            except queue.Empty:
                raise AssertionError(f"`{command}` did not finish in {TIMEOUT} s") from None
            if line is None:
                raise AssertionError(f"the shell ended during `{command}`: {out}")
            if line.startswith(self.MARK):
                return int(line.split()[1]), out
            out.append(line)

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # the shell and every job it started
        self.proc.wait()


def pages() -> list[Path]:
    found = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
    return [p for p in found if shell_blocks(p)]


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shell_block_runs_and_shows_what_it_prints(page, tmp_path):
    shell = Session(tmp_path)
    try:
        for block in shell_blocks(page):
            steps = (commands(block) if block.lang == "console"
                     else [(ln, []) for ln in block.lines if ln.strip() and not ln.lstrip().startswith("#")])
            for command, shown in steps:
                status, printed = shell.run(command)
                wants_error = any("error:" in s or s.startswith("usage:") for s in shown)
                if status != 0 and not wants_error:
                    pytest.fail(f"{block.where()}: `{command}` failed ({status}):\n"
                                + "\n".join(printed))
                if shown:
                    why = matches(shown, printed)
                    assert why is None, f"{block.where()}: `{command}`: {why}"
    finally:
        shell.close()


def test_output_matching_honours_abridged_text_and_lines():
    assert matches(["head 1:9c0e…"], ["head 1:9c0e0123"]) is None
    assert matches(["a", "…", "z"], ["a", "b", "c", "z"]) is None
    assert matches(["a", "…"], ["a", "b"]) is None
    assert "printed more" in matches(["a"], ["a", "b"])
    assert "printed 'b'" in matches(["a"], ["b"])
    assert matches([], []) is None
