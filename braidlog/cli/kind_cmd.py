"""``braidlog kind``: declare a kind in the store's log, and list the kinds a store knows."""

from __future__ import annotations

import json
from typing import IO, Any

from ..errors import ValidationError
from ..kind_schema import declare_kind
from .util import json_flag, load_kinds, open_store, refuse_on_replica, write_json


def register(sub: Any) -> None:
    p = sub.add_parser("kind", help="declare your own kinds in the store; list the kinds it knows",
                       description="Kinds declared in the store are part of its log: covered by "
                       "the chain, exported, shipped to replicas, and known to every process "
                       "that opens the store.")
    kinds = p.add_subparsers(dest="kind_command", metavar="ACTION", required=True)

    a = kinds.add_parser("add", help="declare a kind (or its next version) with a JSON Schema",
                         description="Append a kind_declared delta holding the payload's JSON "
                         "Schema (the object subset: typed properties, required, enums, nested "
                         "objects and arrays, string and number bounds). A new version of a kind "
                         "may only add optional properties. Declaring what the store already holds "
                         "for the kind changes nothing. The store must exist (braidlog init).")
    a.add_argument("name", help="the kind's name (letters, digits, '_' or '.')")
    a.add_argument("--schema", required=True, metavar="FILE",
                   help="a JSON Schema file for the payload ('-' reads standard input)")
    a.add_argument("--owner", default="app", help="who owns the kind (default: app)")
    a.add_argument("--version", type=int, default=None,
                   help="the version declared (default: the next one, 1 for a new kind)")
    a.add_argument("--description", default="", help="a line saying what the kind records")
    a.add_argument("--refers", action="append", default=[], metavar="FIELD",
                   help="a payload property holding the id of the entity a delta is about (repeat "
                   "for several): history, explain and prove state of that id find the delta")
    a.add_argument("--text", action="append", default=[], metavar="FIELD",
                   help="a payload property recall reads as the delta's text (repeat for several)")
    a.add_argument("--braid", default="kinds", help="the braid the declaration goes in (default: kinds)")
    json_flag(a)
    a.set_defaults(handler=cmd_add)

    ls = kinds.add_parser("list", help="every kind the store knows, with owner and versions")
    json_flag(ls)
    ls.set_defaults(handler=cmd_list)


def _schema(path: str) -> Any:
    import sys

    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
    except OSError as e:
        raise ValidationError("--schema", f"cannot read {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise ValidationError("--schema", f"{path} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValidationError("--schema", f"{path} is not JSON: {e.msg} at line {e.lineno} "
                              f"column {e.colno}") from None


def cmd_add(args: Any, out: IO[str]) -> int:
    schema = _schema(args.schema)
    load_kinds(args)  # a name taken by an installed kind is refused as such
    refuse_on_replica(args, "declare a kind")
    with open_store(args, readonly=False) as log:  # refused, like append, when there is no store
        head = log.head().seq
        seq = declare_kind(log, args.name, schema, owner=args.owner, version=args.version,
                           description=args.description, braid_id=args.braid,
                           refers=args.refers, text=args.text)
        spec = log.registry[args.name]
        changed = log.head().seq != head
    if args.json:
        write_json(out, {"kind": args.name, "version": spec.version, "owner": spec.owner, "seq": seq,
                         "changed": changed})
    elif changed:
        out.write(f"declared kind {args.name!r} version {spec.version} (owner {spec.owner}) at seq {seq}\n")
    else:
        out.write(f"kind {args.name!r} version {spec.version} is already declared so (seq {seq}); "
                  "nothing written\n")
    return 0


def _rows(log: Any) -> list[dict[str, Any]]:
    return [{"kind": s.kind, "owner": s.owner, "versions": sorted(s.schemas),
             "declared": "python" if s.declared_at is None else f"store seq {s.declared_at}"}
            | ({"refers": True} if s.refers is not None else {})
            | ({"text": list(s.text)} if s.text else {})
            for s in log.registry.specs()]


def cmd_list(args: Any, out: IO[str]) -> int:
    load_kinds(args)  # the installed packages' kinds and --app's: the set MCP's `kinds` lists
    with open_store(args) as log:
        rows = _rows(log)
    if args.json:
        write_json(out, rows)
        return 0
    width = max(len(r["kind"]) for r in rows)
    owners = max(len(r["owner"]) for r in rows)
    for r in rows:
        versions = ",".join(map(str, r["versions"]))
        out.write(f"{r['kind']:<{width}}  {r['owner']:<{owners}}  v{versions:<6}  {r['declared']}\n")
    return 0
