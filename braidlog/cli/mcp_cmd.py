"""``braidlog mcp``: serve the store to agents over the Model Context Protocol (docs/mcp.md).

It needs the optional extra ``braidlog[mcp]`` (the official MCP SDK); without it the command
says in one line how to install it. The SDK is imported only when the command runs.
"""

from __future__ import annotations

import os
from typing import IO, Any

from ..delta import PROVENANCE_KINDS
from .util import store_path

TOKEN_ENV = "BRAIDLOG_MCP_TOKEN"  # also braidlog.mcp.server.TOKEN_ENV; kept here: no SDK import
EMBEDDER_ENV = "BRAIDLOG_EMBEDDER"  # also braidlog.recall.ENV; kept here: no numpy import


def register(sub: Any) -> None:
    p = sub.add_parser(
        "mcp", help="serve the store to agents over the Model Context Protocol",
        description="Serve --store to MCP clients (Claude Desktop, agent runtimes): tools for the "
        "log (append, head, verify, show, history, diff, explain, state_at, recall, kinds), for "
        "LedgerMind decisions, MemState fields, typedmem memories and Braid episodes, knots, "
        "forks and trust, and resources braidlog://head, braidlog://delta/{id} and "
        "braidlog://braid/{id}. Over stdio by default; --http serves streamable HTTP. Every "
        "delta written records provenance source 'mcp' (kind 'assistant' unless the call claims "
        "another the server allows). Needs pip install '.[mcp]'. See docs/mcp.md.")
    p.add_argument("--http", metavar="[HOST:]PORT", default=None,
                   help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (host "
                   "127.0.0.1 unless given; another host needs a token)")
    p.add_argument("--token", default=None,
                   help=f"bearer token every HTTP request must carry (default: ${TOKEN_ENV}; "
                   "prefer the variable: a command line shows in ps)")
    p.add_argument("--read-only", action="store_true",
                   help="serve the read tools only; the store is opened read-only")
    p.add_argument("--allow-provenance", action="append", default=None, metavar="KIND",
                   choices=PROVENANCE_KINDS,
                   help="a provenance kind calls may claim besides the default ones (assistant, "
                   "tool, perception, dream); 'user' lets a call act as a human, past a "
                   "HUMAN_ONLY trust boundary. Repeat for several")
    p.add_argument("--embedder", default=None, metavar="SPEC",
                   help="the embedder of appends (embed) and recall queries: hashing, model2vec:DIR, "
                   "sentence-transformers:DIR, fastembed:NAME, wordllama or module:attribute (default: "
                   f"${EMBEDDER_ENV}, else each space's recorded embedder, else hashing); loaded at "
                   "start, so a model that is not on this machine stops the server at once")
    p.add_argument("--log-level", default="WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                   help="server log level on standard error (default WARNING)")
    p.set_defaults(handler=cmd_mcp)


def cmd_mcp(args: Any, out: IO[str]) -> int:
    # without the SDK, importing braidlog.mcp raises MissingDependency naming the extra (one rule
    # for every extra, in the package's __init__): main prints it in one line
    from ..mcp import DEFAULT_ALLOWED, serve

    token = args.token or (os.environ.get(TOKEN_ENV) if args.http else None) or None
    allowed = set(DEFAULT_ALLOWED) | set(args.allow_provenance or ())
    try:
        serve(store_path(args), http=args.http, token=token, read_only=args.read_only,
              allow_provenance=allowed, apps=getattr(args, "app", None), log_level=args.log_level,
              embedder=args.embedder or os.environ.get(EMBEDDER_ENV, "").strip() or None)
    except KeyboardInterrupt:
        pass
    return 0
