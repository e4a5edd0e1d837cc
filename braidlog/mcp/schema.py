"""Tools whose schemas come from msgspec Structs, served by the MCP SDK.

The SDK derives a tool's schemas from a function signature through pydantic; braidlog's
arguments and results are msgspec Structs (the commands of the projections, the envelope of a
delta, the views the projections return). So a tool is assembled here from its parts:

- its **input schema** is the JSON Schema msgspec derives from the tool's argument Struct, which
  is itself built from the fields of the command or envelope Structs (``arguments``), so a field
  added to a command shows in the tool with no change here;
- its **arguments** pass through the SDK untouched (a pydantic model that accepts any object)
  and are converted here, strictly, against that Struct: a bad argument is a braidlog
  ``ValidationError`` naming the field and the rule, like every other door into the log;
- its **output schema** is msgspec's schema of the result Struct, and a result is returned as
  structured content with the same JSON as text, which clients check against that schema.

A ``BraidlogError`` raised by a tool becomes the SDK's ``ToolError`` with braidlog's message, so
the client reads the field and the rule (anything else is a bug: the SDK logs it and tells the
client only that the tool failed).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import msgspec
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from msgspec import Meta, Struct
from pydantic import ConfigDict

from ..errors import BraidlogError, ValidationError

__all__ = ["ToolSpec", "arguments", "described", "json_schema", "parse", "encode", "sdk_tool"]

_REQUIRED = msgspec.NODEFAULT


def described(tp: Any, description: str) -> Any:
    """``tp`` with a description in its JSON Schema."""
    return Annotated[tp, Meta(description=description)]


def arguments(name: str, *parts: type[Struct] | Iterable[tuple[str, Any, Any]],
              omit: Collection[str] = (), only: Collection[str] | None = None,
              defaults: Mapping[str, Any] | None = None, types: Mapping[str, Any] | None = None,
              describe: Mapping[str, str] | None = None, doc: str | None = None) -> type[Struct]:
    """A Struct for a tool's arguments: the fields of each part in order, then no others.

    A part is a Struct (its fields are taken as declared, with their types, constraints and
    defaults) or ``(name, type, default)`` triples; ``only`` keeps just the named fields of the
    Struct parts, ``omit`` drops fields the server sets itself, ``defaults`` gives a default to
    a field that has none, ``types`` replaces a field's type, ``describe`` adds descriptions.
    Two parts may not share a field name.
    """
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []  # (name, type[, default]): defstruct's form
    seen: set[str] = set()
    defaults, types, describe = dict(defaults or {}), dict(types or {}), dict(describe or {})
    for part in parts:
        if isinstance(part, type) and issubclass(part, Struct):
            triples = []
            for f in msgspec.structs.fields(part):
                if f.name in omit or (only is not None and f.name not in only):
                    continue
                default = (msgspec.field(default_factory=f.default_factory)
                           if f.default_factory is not msgspec.NODEFAULT else f.default)
                triples.append((f.name, f.type, default))
        else:
            triples = list(part)
        for field, tp, default in triples:
            if field in seen:
                raise TypeError(f"tool arguments {name}: two parts declare {field!r}")
            seen.add(field)
            if field in defaults:
                default = defaults.pop(field)
            if field in types:
                tp = types.pop(field)
            if field in describe:
                tp = described(tp, describe.pop(field))
            fields.append((field, tp) if default is _REQUIRED else (field, tp, default))
    if defaults or types or describe:
        raise TypeError(f"tool arguments {name}: no field {sorted({*defaults, *types, *describe})}")
    cls = msgspec.defstruct(name, fields, kw_only=True, forbid_unknown_fields=True,
                            module=__name__)
    cls.__doc__ = doc
    return cls


def _no_false_schemas(node: Any) -> Any:
    """``node`` without boolean ``false`` subschemas, which strict validators (the MCP Inspector
    in strict mode) refuse: a fixed-length tuple's ``"items": false`` goes (its ``maxItems``
    already bounds it), any other ``false`` subschema becomes ``{"not": {}}``.
    ``additionalProperties: false`` is a keyword's value, not a subschema here, and stays."""
    if isinstance(node, list):
        return [_no_false_schemas(x) for x in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if value is False and key in ("items", "additionalItems", "contains", "not",
                                      "unevaluatedItems", "propertyNames"):
            if key == "items" and "prefixItems" in node and node.get("maxItems") == len(node["prefixItems"]):
                continue
            out[key] = {"not": {}}
        elif key in ("properties", "$defs", "patternProperties") and isinstance(value, dict):
            out[key] = {k: ({"not": {}} if v is False else _no_false_schemas(v)) for k, v in value.items()}
        else:
            out[key] = _no_false_schemas(value)
    return out


def json_schema(tp: Any) -> dict[str, Any]:
    """msgspec's JSON Schema of ``tp`` with its root inlined (MCP wants an object at the root),
    and no boolean ``false`` subschema (``_no_false_schemas``)."""
    schema = _no_false_schemas(msgspec.json.schema(tp))
    ref = schema.pop("$ref", None)
    if ref is None:
        return schema
    defs = schema["$defs"]
    root = dict(defs[ref.rsplit("/", 1)[-1]])
    root.pop("title", None)
    if any(f'"{ref}"' in json.dumps(d) for d in defs.values()):  # the root is referred to: keep it
        return {**root, "$defs": defs}
    defs.pop(ref.rsplit("/", 1)[-1])
    return {**root, "$defs": defs} if defs else root


def _error(e: msgspec.ValidationError) -> ValidationError:
    """A braidlog ValidationError naming the argument at fault, from msgspec's message."""
    text = str(e)
    rule, sep, path = text.rpartition(" - at `$")
    if not sep:
        rule, path = text, ""
    path = path.rstrip("`").lstrip(".")
    for lead in ("Object missing required field `", "Object contains unknown field `"):
        if rule.startswith(lead):
            name = rule[len(lead):].rstrip("`")
            path = f"{path}.{name}" if path else name
            rule = ("is required" if "missing" in lead
                    else "is not an argument of this tool (see its input schema)")
    return ValidationError(path or "arguments", rule)


def parse(args: type[Struct], arguments: Mapping[str, Any]) -> Any:
    """The arguments as ``args``, strictly; a top-level object or array sent as a JSON string
    (some clients do) is decoded first. ValidationError names the argument at fault."""
    values = dict(arguments)
    while True:
        try:
            return msgspec.convert(values, args)
        except msgspec.ValidationError as e:
            error = _error(e)
            value = values.get(error.field)
            if isinstance(value, str) and "got `str`" in error.rule and value.lstrip()[:1] in ("{", "["):
                try:
                    values[error.field] = json.loads(value)
                    continue
                except ValueError:
                    pass
            raise error from None
        except BraidlogError:
            raise
        except (TypeError, ValueError) as e:  # a Struct's own __post_init__ check
            raise ValidationError("arguments", str(e)) from None


def _enc_hook(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise NotImplementedError(f"cannot encode {type(value).__name__}")


def encode(value: Any) -> CallToolResult:
    """A result as structured content, and the same JSON as text for clients that read text."""
    data = msgspec.to_builtins(value, enc_hook=_enc_hook)
    text = msgspec.json.encode(data, order="deterministic").decode()
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


class _PassThrough(ArgModelBase):
    """Accepts any arguments object and hands it on whole: ``parse`` checks it against the
    tool's Struct, so that errors are braidlog's."""

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

    def model_dump_one_level(self) -> dict[str, Any]:
        return {"arguments": dict(self.model_extra or {})}


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its name, argument and result types, and what it does with a store."""

    name: str
    args: type[Struct]
    result: Any
    run: Callable[[Any, Any], Any]
    description: str
    writes: bool = False
    title: str | None = None
    idempotent: bool = False
    #: Writes only when asked (recall's ``record``): served read-only too, where asking is refused,
    #: and annotated as a write tool where it can write.
    may_write: bool = False


def sdk_tool(spec: ToolSpec, store: Any) -> Tool:
    """The SDK's Tool for ``spec``, bound to ``store``."""

    def call(arguments: dict[str, Any]) -> CallToolResult:
        try:
            return encode(spec.run(store, parse(spec.args, arguments)))
        except BraidlogError as e:
            raise ToolError(str(e)) from None

    writes = spec.writes or (spec.may_write and not getattr(store, "read_only", True))
    annotations = ToolAnnotations(title=spec.title, read_only_hint=not writes,
                                  destructive_hint=False if writes else None,
                                  idempotent_hint=spec.idempotent if writes else None,
                                  open_world_hint=False)
    return Tool(fn=call, name=spec.name, title=spec.title, description=spec.description,
                parameters=json_schema(spec.args),
                fn_metadata=FuncMetadata(arg_model=_PassThrough, output_schema=json_schema(spec.result)),
                is_async=False, context_kwarg=None, annotations=annotations)
