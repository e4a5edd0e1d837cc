"""What the erasure tests share: a search of every file of a store's directory for bytes."""

from __future__ import annotations

import os
from pathlib import Path


def files_holding(root: str | os.PathLike[str], *needles: bytes | str) -> dict[str, list[str]]:
    """Every file under ``root`` (recursively, whatever its name or size) that holds one of
    ``needles`` (str as UTF-8), by needle; {} when none does. Compressed files (a tantivy
    index's stored fields) would hide text from this search: the erasure removes them whole."""
    wanted = [n.encode() if isinstance(n, str) else bytes(n) for n in needles]
    found: dict[str, list[str]] = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            try:
                data = path.read_bytes()
            except OSError:
                continue
            for n in wanted:
                if n in data:
                    found.setdefault(n.decode(errors="replace"), []).append(
                        str(path.relative_to(root)))
    return found
