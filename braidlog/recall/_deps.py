"""Recall's optional dependencies, checked once with a one-line error that says how to install them.

The core of braidlog installs without a compiler and without numpy; recall brings numpy, hnswlib
(the vector graphs) and tantivy (the keyword index) through the ``recall`` extra. Every module of
this package imports them after ``need`` has checked they are there.
"""

from __future__ import annotations

import importlib

from ..errors import MissingDependency

INSTALL = "pip install '.[recall]'"


def need(*modules: str, what: str = "recall") -> None:
    """Raise ``MissingDependency`` naming every module of ``modules`` that is not installed."""
    missing = []
    for m in modules:
        try:
            importlib.import_module(m)
        except ImportError:
            missing.append(m)
    if missing:
        names = " and ".join(missing)
        verb = "is" if len(missing) == 1 else "are"
        raise MissingDependency(f"braidlog {what} needs {names}, which {verb} not installed; "
                                f"install it with: {INSTALL}")
