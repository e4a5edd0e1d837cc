"""Start-up: what ``import braidlog`` and ``braidlog head`` load, in a fresh interpreter.

Speed is measured by ``braidlog bench`` (the start-up workload) and its bench in bench/; these
tests pin what makes it: the modules a start-up must not import, and the public API still
complete when part of it loads on first use.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import braidlog

#: Loaded only where used: recall (numpy, hnswlib), rich output, the projections, replication,
#: and the bench's peers.
HEAVY = ("numpy", "hnswlib", "tantivy", "rich", "braidlog.projections", "nats", "eventsourcing",
         "sqlite3", "cryptography", "mcp", "anyio", "braidlog.recall", "braidlog.bench",
         "braidlog.audit", "braidlog.transfer", "braidlog.replication", "braidlog.mcp")


def loaded_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)), file=sys.stderr)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY or m in HEAVY
                  or any(m.startswith(h + ".") for h in HEAVY))


def test_import_braidlog_loads_none_of_the_heavy_modules():
    assert heavy(loaded_after("import braidlog")) == []


def test_braidlog_head_loads_none_of_the_heavy_modules(tmp_path):
    braidlog.LmdbLog(tmp_path / "s").close()
    code = ("import contextlib, io\nfrom braidlog.cli import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            f"    assert main(['--store', {str(tmp_path / 's')!r}, 'head']) == 0\n"
            "assert out.getvalue().startswith('0:'), out.getvalue()")
    assert heavy(loaded_after(code)) == []


def test_the_help_still_lists_every_command(capsys):
    from braidlog.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    listed = capsys.readouterr().out
    for command in ("head", "append", "history", "export", "bench", "recall", "replica"):
        assert command in listed


@pytest.mark.parametrize("name", braidlog.__all__)
def test_every_public_name_resolves(name):
    assert getattr(braidlog, name) is not None


def test_a_name_braidlog_lacks_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        braidlog.Nope  # noqa: B018  (the attribute read is the test)


def test_the_payload_type_checked_in_c_stays_small():
    """The strict decoder checks the first levels of a payload in C; its type doubles in size
    with every level, so a deeper one would cost seconds at import (deeper payloads are
    checked by a walk instead: tests/test_delta.py)."""
    from braidlog.delta import FAST_PAYLOAD_DEPTH, MAX_PAYLOAD_DEPTH

    assert 3 <= FAST_PAYLOAD_DEPTH <= 6 < MAX_PAYLOAD_DEPTH
