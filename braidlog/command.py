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
delta passes. A ``decide`` that trusted a field's declared type and crashed on another is met by
``command_fault``: ``Braid.execute`` then raises the ValidationError naming the field that does
not match its declaration, and lets the crash through only when the command is well formed (a
bug to fix, not bad input). Decoding a command (``msgspec.convert``, JSON from the command line
or MCP) checks its field types and refuses unknown fields, as for any Struct.
"""

from __future__ import annotations

import datetime
import decimal
import re
import uuid
from typing import Any, dataclass_transform

import msgspec
from msgspec import Struct, StructMeta

from .delta import _bad_text, _find
from .errors import ValidationError

__all__ = ["Command", "CommandMeta", "command_fault"]

_BUILTIN = (bytes, bytearray, memoryview, datetime.datetime, datetime.date, datetime.time,
            datetime.timedelta, uuid.UUID, decimal.Decimal)

_TOO_DEEP = "a field nests too deep, or contains itself"
_ARGUMENT = re.compile(r"(Missing required|Unexpected keyword) argument '([^']+)'"
                       r"|Argument '([^']+)' given by name and position|Extra positional arguments provided")


# Declared a dataclass transform, as msgspec declares Struct, so a type checker treats ``Command``
# (which names this metaclass) as neither frozen nor not: a command may be either (PEP 681).
@dataclass_transform(field_specifiers=(msgspec.field,))
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
        except RecursionError:  # a __post_init__ that walks its fields met a cycle
            raise ValidationError(cls.__name__, _TOO_DEEP) from None
        except UnicodeError:  # a __post_init__ that encodes its fields met a lone surrogate
            fault = _find(kwargs, "", _bad_text) or _find(list(args), "", _bad_text)
            if fault is None:
                raise
            raise ValidationError(fault[0].lstrip("."), fault[1]) from None
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

        close = difflib.get_close_matches(m.group(2), [f.name for f in msgspec.structs.fields(cls)], n=1)
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


def command_fault(command: Any) -> ValidationError | None:
    """Why ``command`` does not match what its class declares (each field's type and
    constraints), as a ValidationError naming the field; None when it matches."""
    if not isinstance(command, Struct):
        return ValidationError("command", f"must be a command (a braidlog.Command), not "
                               f"{type(command).__name__}")
    cls = type(command)
    name = cls.__name__
    try:
        plain = msgspec.to_builtins(command, builtin_types=_BUILTIN)
        msgspec.convert(plain, cls)
    except (TypeError, msgspec.EncodeError) as e:
        unsupported = re.search(r"objects of type (\S+) is unsupported", str(e))
        field = _first_field(command, lambda v: msgspec.to_builtins(v, builtin_types=_BUILTIN))
        return ValidationError(field or name, f"must be plain data (text, numbers, booleans, None, "
                               f"lists, dicts, times or Structs), not "
                               f"{unsupported.group(1) if unsupported else 'this value'} ({name})")
    except msgspec.ValidationError as e:
        rule, sep, path = str(e).rpartition(" - at `$")
        if not sep:
            rule, path = str(e), ""
        return ValidationError(path.rstrip("`").lstrip(".") or name, f"{rule} ({name})")
    except RecursionError:
        return ValidationError(name, _TOO_DEEP)
    return None


def _first_field(command: Any, check: Any) -> str | None:
    """The first field of ``command`` whose value ``check`` refuses."""
    for field in command.__struct_fields__:
        try:
            check(getattr(command, field))
        except Exception:  # any: only which field fails matters here
            return field
    return None
