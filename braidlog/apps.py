"""Where kinds and projections come from: installed entry points and application modules.

The engine never imports a projection family. A package makes its projections known to every
braidlog process (the ``braidlog`` command, ``braidlog.open``) by entry points in its metadata::

    [project.entry-points."braidlog.projections"]
    todo = "todo_app.braidlog:PROJECTIONS"      # a list of Projections, or a callable giving one

    [project.entry-points."braidlog.kinds"]
    todo = "todo_app.kinds"                      # a module that declares kinds when imported

braidlog's own families are registered the same way. An application that is not installed
names its module with ``--app MODULE`` or ``BRAIDLOG_APP=MODULE[,MODULE…]``: a module importable
from the current directory or the path (``myapp`` for ``./myapp.py``, ``pkg.app``), or a file
path (``./myapp.py``, ``apps/todo.py``); importing the module declares its kinds, and its
``PROJECTIONS`` (a list, or a callable) are its projections.

Hazards: an entry point that fails to load is an error naming it, not a silent omission (a
projection missing from a fold would give wrong answers); loading runs the package's code.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from .errors import ValidationError
from .projection import Projection

__all__ = ["APP_ENV", "KINDS_GROUP", "PROJECTIONS_GROUP", "app_modules", "import_app", "load_kinds",
           "discover", "app_projections", "for_store"]

APP_ENV = "BRAIDLOG_APP"
KINDS_GROUP = "braidlog.kinds"
PROJECTIONS_GROUP = "braidlog.projections"


def app_modules(apps: Iterable[str] | None = None) -> list[str]:
    """The application modules named by ``apps`` (e.g. ``--app``), else by ``BRAIDLOG_APP``."""
    names = list(apps or ())
    if not names:
        names = [m for m in os.environ.get(APP_ENV, "").split(",")]
    return [m.strip() for m in names if m and m.strip()]


#: braidlog's own families, as its metadata registers them; also used when that metadata is
#: missing (a source checkout on sys.path, an install that predates the entry point).
OWN = ("braidlog", "braidlog.projections:default_projections")


def _entry_points(group: str) -> list[Any]:
    from importlib.metadata import EntryPoint, entry_points  # costs milliseconds: load on use

    found = {ep.name: ep for ep in entry_points(group=group)}
    if group == PROJECTIONS_GROUP and OWN[0] not in found:
        found[OWN[0]] = EntryPoint(OWN[0], OWN[1], group)
    return sorted(found.values(), key=lambda ep: ep.name)


def _load(what: str, load: Any, hint: str = "is its package installed in this environment?") -> Any:
    try:
        return load()
    except ImportError as e:
        raise ValidationError("app", f"cannot load {what}: {e}; {hint}") from e
    except Exception as e:  # the package's own code failed: say whose
        raise ValidationError("app", f"loading {what} failed: {type(e).__name__}: {e}") from e


def _projections_of(what: str, value: Any) -> list[Projection]:
    if callable(value) and not isinstance(value, Projection):
        value = _load(what, value)
    items = [value] if isinstance(value, Projection) else list(value or ())
    bad = [x for x in items if not isinstance(x, Projection)]
    if bad:
        raise ValidationError("app", f"{what} gives {type(bad[0]).__name__}, not Projections")
    return items


def load_kinds(apps: Iterable[str] | None = None) -> None:
    """Declare every installed kind (entry points of both groups: loading a projection declares
    the kinds it owns) and those of the application modules."""
    discover(apps)


_HOW = ("--app takes a module importable from the current directory or PYTHONPATH (myapp for "
        "./myapp.py) or the path of a Python file (./myapp.py)")


def _is_path(name: str) -> bool:
    return name.endswith(".py") or os.sep in name or (os.altsep is not None and os.altsep in name)


def import_app(name: str) -> Any:
    """The application module ``name`` names: a module importable from the current directory
    or the path, or a Python file's path (imported under its file name)."""
    what = f"application module {name!r}"
    if _is_path(name):
        path = os.path.abspath(name)
        if not os.path.isfile(path):
            raise ValidationError("app", f"cannot load {what}: no file {path}; {_HOW}")
        module_name = os.path.splitext(os.path.basename(path))[0]
        loaded = sys.modules.get(module_name)
        if loaded is not None and os.path.abspath(getattr(loaded, "__file__", "") or "") == path:
            return loaded
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise ValidationError("app", f"cannot load {what}: {path} is not a Python module; {_HOW}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module

        def run() -> Any:
            try:
                spec.loader.exec_module(module)  # type: ignore[union-attr]  # a spec from a file has a loader
            except BaseException:
                sys.modules.pop(module_name, None)
                raise
            return module
        return _load(what, run, hint=_HOW)
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)  # as `python -m` would: a module beside the user is found
    return _load(what, lambda: importlib.import_module(name), hint=_HOW)


def _declare_kinds(apps: Iterable[str] | None) -> None:
    for ep in _entry_points(KINDS_GROUP):
        value = _load(f"entry point {ep.name!r} ({ep.value})", ep.load)
        if callable(value):
            _load(f"entry point {ep.name!r} ({ep.value})", value)
    for module in app_modules(apps):
        import_app(module)


def discover(apps: Iterable[str] | None = None) -> list[Projection]:
    """Every installed projection (entry points), then the application modules' ``PROJECTIONS``;
    their kinds are declared on the way. Names are unique: a second one is an error."""
    _declare_kinds(apps)
    found: list[Projection] = []
    for ep in _entry_points(PROJECTIONS_GROUP):
        what = f"entry point {ep.name!r} ({ep.value})"
        found += _projections_of(what, _load(what, ep.load))
    for p in app_projections(apps):
        found.append(p)
    seen: dict[str, Projection] = {}
    for p in found:
        if p.name in seen and seen[p.name] is not p:
            raise ValidationError("app", f"two projections are named {p.name!r}; an application's "
                                  "projection needs a name of its own")
        seen[p.name] = p
    return list(seen.values())


def app_projections(apps: Iterable[str] | None = None) -> list[Projection]:
    """The projections of the application modules ``apps`` (or ``BRAIDLOG_APP``) name."""
    found: list[Projection] = []
    for module in app_modules(apps):
        mod = import_app(module)
        if hasattr(mod, "PROJECTIONS"):
            found += _projections_of(f"application module {module!r}'s PROJECTIONS", mod.PROJECTIONS)
    return found


def for_store(available: Sequence[Projection], used: Sequence[str]
              ) -> tuple[list[Projection], list[str]]:
    """The projections a store is used with, among those available, and the names it uses that
    are not available (its application is not installed or not named). A store that records
    none (made before stores recorded them) gets every available projection."""
    if not used:
        return list(available), []
    by_name = {p.name: p for p in available}
    return [by_name[n] for n in used if n in by_name], [n for n in used if n not in by_name]
