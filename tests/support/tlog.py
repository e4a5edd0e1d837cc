"""Go's own verifier of transparency logs for the tests: tests/proofs/go/tlogcheck.go, built
with Debian's Go and golang.org/x/mod/sumdb/tlog and note, which know nothing of braidlog."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["GO_SOURCE", "GO_TLOG", "GO_HOW", "have_go", "build_tlogcheck"]

GO_SOURCE = Path(__file__).resolve().parent.parent / "proofs" / "go" / "tlogcheck.go"
#: Where Debian's golang-golang-x-mod-dev puts the tlog package.
GO_TLOG = Path("/usr/share/gocode/src/golang.org/x/mod/sumdb/tlog")
GO_HOW = ("Go and golang.org/x/mod are missing: `apt-get install -y golang-go "
          "golang-golang-x-mod-dev` (Debian/Ubuntu), then the test builds tests/proofs/go/tlogcheck.go "
          "with GO111MODULE=off GOPATH=/usr/share/gocode GOPROXY=off")


def have_go() -> bool:
    """Whether Go and golang.org/x/mod are installed where the build looks for them."""
    return shutil.which("go") is not None and GO_TLOG.is_dir()


def build_tlogcheck(work: Path) -> Path:
    """Build tlogcheck.go in ``work`` (offline, from the system's GOPATH); the binary's path.
    AssertionError with Go's output when the build fails."""
    shutil.copy(GO_SOURCE, work / "tlogcheck.go")
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": "/usr/share/gocode", "GOPROXY": "off",
           "GOFLAGS": "", "GOCACHE": str(work / "cache")}
    built = subprocess.run(["go", "build", "-o", "tlogcheck", "tlogcheck.go"], cwd=work, env=env,
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    return work / "tlogcheck"
