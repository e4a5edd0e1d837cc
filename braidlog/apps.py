"""Where kinds and projections come from: installed entry points and application modules.

The engine never imports a projection family. A package makes its projections known to every
braidlog process (the ``braidlog`` command, ``braidlog.open``) by entry points in its metadata::

    [project.entry-points."braidlog.projections"]
    todo = "todo_app.braidlog:PROJECTIONS"      # a list of Projections, or a callable giving one

    [project.entry-points."braidlog.kinds"]
    todo = "todo_app.kinds"                      # a module that declares kinds when imported

braidlog's own families are registered the same way. An application that is not installed
names its module with ``--app MODULE`` or ``BRAIDLOG_APP=MODULE[,MODULE…]``; importing the
module declares its kinds, and its ``PROJECTIONS`` (a list, or a callable) are its projections.

Hazards: an entry point that fails to load is an error naming it, not a silent omission (a
projection missing from a fold would give wrong answers); loading runs the package's code.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable, Sequence
from typing import Any

from .errors import ValidationError
from .projection import Projection

__all__ = ["APP_ENV", "KINDS_GROUP", "PROJECTIONS_GROUP", "app_modules", "load_kinds",
           "discover", "for_store"]

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


def _load(what: str, load: Any) -> Any:
    try:
        return load()
    except ImportError as e:
        raise ValidationError("app", f"cannot load {what}: {e}; is its package installed in "
                              "this environment?") from e
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


def _declare_kinds(apps: Iterable[str] | None) -> None:
    for ep in _entry_points(KINDS_GROUP):
        value = _load(f"entry point {ep.name!r} ({ep.value})", ep.load)
        if callable(value):
            _load(f"entry point {ep.name!r} ({ep.value})", value)
    for module in app_modules(apps):
        _load(f"application module {module!r}", lambda m=module: importlib.import_module(m))


def discover(apps: Iterable[str] | None = None) -> list[Projection]:
    """Every installed projection (entry points), then the application modules' ``PROJECTIONS``;
    their kinds are declared on the way. Names are unique: a second one is an error."""
    _declare_kinds(apps)
    found: list[Projection] = []
    for ep in _entry_points(PROJECTIONS_GROUP):
        what = f"entry point {ep.name!r} ({ep.value})"
        found += _projections_of(what, _load(what, ep.load))
    for module in app_modules(apps):
        what = f"application module {module!r}"
        mod = importlib.import_module(module)  # loaded by load_kinds above
        if not hasattr(mod, "PROJECTIONS"):
            continue
        found += _projections_of(f"{what}'s PROJECTIONS", mod.PROJECTIONS)
    seen: dict[str, Projection] = {}
    for p in found:
        if p.name in seen and seen[p.name] is not p:
            raise ValidationError("app", f"two projections are named {p.name!r}; an application's "
                                  "projection needs a name of its own")
        seen[p.name] = p
    return list(seen.values())


def for_store(available: Sequence[Projection], used: Sequence[str]
              ) -> tuple[list[Projection], list[str]]:
    """The projections a store is used with, among those available, and the names it uses that
    are not available (its application is not installed or not named). A store that records
    none (made before stores recorded them) gets every available projection."""
    if not used:
        return list(available), []
    by_name = {p.name: p for p in available}
    return [by_name[n] for n in used if n in by_name], [n for n in used if n not in by_name]
