"""``Command``: the base of every command a ``Decider`` decides.

A command is the caller's input. msgspec reports a missing or unknown argument of a Struct with
a bare ``TypeError``; a Struct that derives from ``Command`` raises ``ValidationError`` naming
the field, the rule and the fields the command takes, and refuses a string that is not text (a
lone surrogate, which no store can encode)::

    class TieKnot(Command, frozen=True):
        knot_id: str
        summary: str = ""

    TieKnot(knot_id="k1", summry="x")
    # ValidationError: summry: is not a field of TieKnot (did you mean 'summary'? TieKnot
    #                  takes knot_id and optionally summary)

A projection author derives each command from ``Command`` instead of ``msgspec.Struct`` (its
Struct options stay as they were). The values of the fields are checked where the rules live:
by ``decide`` and by the payload schemas of the kinds the command appends, at the boundary every
delta passes. Decoding a command (``msgspec.convert``, JSON from the command line or MCP)
checks its field types and refuses unknown fields, as for any Struct.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
from msgspec import Struct, StructMeta

from .delta import _bad_text, _find
from .errors import ValidationError

__all__ = ["Command", "CommandMeta"]

_ARGUMENT = re.compile(r"(Missing required|Unexpected keyword) argument '([^']+)'"
                       r"|Argument '([^']+)' given by name and position|Extra positional arguments provided")


class CommandMeta(StructMeta):
    """The metaclass of ``Command``: building an instance checks it (decoding does too)."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        try:
            command = super().__call__(*args, **kwargs)
        except TypeError as e:
            error = _argument_error(cls, e)
            if error is None:
                raise
            raise error from None
        return _checked(cls, command)


class Command(Struct, metaclass=CommandMeta, kw_only=True, forbid_unknown_fields=True):
    """Base of a command Struct: a bad field is a ValidationError naming the field and the rule."""


def _takes(cls: type) -> str:
    fields = msgspec.structs.fields(cls)
    required = [f.name for f in fields if f.required]
    optional = [f.name for f in fields if not f.required]
    said = ", ".join(required)
    if optional:
        said = f"{said} and optionally {', '.join(optional)}" if said else f"optionally {', '.join(optional)}"
    return f"{cls.__name__} takes {said}" if said else f"{cls.__name__} takes no fields"


def _argument_error(cls: type, e: TypeError) -> ValidationError | None:
    """The ValidationError for msgspec's constructor TypeErrors (None for any other TypeError)."""
    m = _ARGUMENT.fullmatch(str(e))
    if m is None:
        return None
    name = cls.__name__
    if m.group(1) == "Missing required":
        return ValidationError(m.group(2), f"is required ({_takes(cls)})")
    if m.group(1) == "Unexpected keyword":
        import difflib

        close = difflib.get_close_matches(m.group(2), cls.__struct_fields__, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return ValidationError(m.group(2), f"is not a field of {name} ({hint}{_takes(cls)})")
    if m.group(3):
        return ValidationError(m.group(3), f"is given twice to {name}, by position and by name")
    return ValidationError(name, f"takes its fields by name ({_takes(cls)})")


def _checked(cls: type, command: Any) -> Any:
    """``command``, refused if a string in it is not text (a lone surrogate cannot be stored)."""
    fault = _find(command, "", _bad_text)
    if fault is not None:
        raise ValidationError(fault[0].lstrip("."), fault[1])
    return command
