"""The MCP server over one store: ``build_server(backend)``, and ``serve`` over stdio or HTTP.

Over stdio the server is the child of one client (a desktop host, an agent runtime): its
security boundary is that process. Over streamable HTTP it listens on 127.0.0.1 unless told
otherwise, and it refuses any other address without a bearer token; with a token, every
request must carry ``Authorization: Bearer <token>`` (compared in constant time), on loopback
too. The SDK's DNS-rebinding checks stay on for loopback addresses.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import sys
from collections.abc import Iterable
from typing import Any, Literal

import anyio
from mcp.server.mcpserver import MCPServer

from ..errors import ValidationError
from .backend import DEFAULT_ALLOWED, Backend
from .projection_tools import projection_tools
from .receipt_tools import receipt_tools
from .resources import add_resources
from .schema import sdk_tool
from .tools import log_tools

#: The levels the server logs at (the SDK's names).
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

__all__ = ["build_server", "serve", "parse_listen", "is_loopback", "BearerAuth", "INSTRUCTIONS",
           "TOKEN_ENV", "PATH"]

#: The environment variable a bearer token may come from (safer than --token: not in `ps`).
TOKEN_ENV = "BRAIDLOG_MCP_TOKEN"
#: Where the streamable HTTP endpoint is served.
PATH = "/mcp"
DEFAULT_PORT = 8765

INSTRUCTIONS = """\
braidlog is an append-only, hash-chained log of an agent's memory. Every change is an immutable
delta; nothing is ever updated or deleted. Projections fold the log into LedgerMind decisions,
MemState fields, typedmem memories and Braid episodes, knots, forks and trust, and any past state
can be read back exactly (`at`: a seq, a delta id or an ISO time).
Write with the command tools (record_decision, revise_field, add_memory …) or `append`; read with
get_field, list_memories, search_decisions, recall, history, explain, state_at, diff. Every delta
written here records provenance source 'mcp' and kind 'assistant' unless the server allows the
call to claim another. A refused write names the field and the rule, and writes nothing.
To leave an auditable record of what a turn saw, call recall with record true (and run, turn):
it returns a context_id, which context_show and context_replay read back."""


def build_server(backend: Backend, *, log_level: LogLevel = "WARNING") -> MCPServer:
    """An MCPServer serving ``backend``: every read tool, the write tools unless it is
    read-only, and the resources."""
    from .. import __version__

    specs = [*log_tools(), *projection_tools(), *receipt_tools()]
    tools = [sdk_tool(s, backend) for s in specs if not (s.writes and backend.read_only)]
    server = MCPServer("braidlog", title="braidlog", version=__version__,
                       instructions=INSTRUCTIONS + (
                           "\nThis server is read-only: it serves no write tool." if backend.read_only else ""),
                       tools=tools, log_level=log_level)
    add_resources(server, backend)
    return server


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` or ``PORT`` (host 127.0.0.1); an IPv6 host in brackets."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValidationError("--http", f"{text!r} is not HOST:PORT (a port is 0..65535)")
    return host, int(port)


class BearerAuth:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not self._allowed(scope):
            body = json.dumps({"error": "invalid_token",
                               "error_description": "a valid bearer token is required"}).encode()
            await send({"type": "http.response.start", "status": 401, "headers": [
                (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b'Bearer realm="braidlog", error="invalid_token"')]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)

    def _allowed(self, scope: Any) -> bool:
        given = b""
        for name, value in scope.get("headers", ()):
            if name.lower() == b"authorization":
                given = value
                break
        scheme, _, token = given.partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self._token)


def serve(path: str, *, http: str | None = None, token: str | None = None, read_only: bool = False,
          allow_provenance: Iterable[str] = DEFAULT_ALLOWED, apps: Iterable[str] | None = None,
          log_level: LogLevel = "WARNING", announce: Any = sys.stderr, embedder: str | None = None) -> None:
    """Serve the store at ``path`` until the client goes away (stdio) or the process is
    stopped (HTTP). Raises ValidationError before opening anything when the address or the
    token does not allow serving. ``embedder`` (a spec) embeds appends and recall queries;
    None: each space's recorded embedder, else hashing."""
    listen = None
    if http is not None:
        listen = parse_listen(http)
        if not is_loopback(listen[0]) and not token:
            raise ValidationError("--http", f"{listen[0]} is reachable from other machines; serving "
                                  f"the store there needs a bearer token (--token or ${TOKEN_ENV}), "
                                  "or bind 127.0.0.1")
        _check_listen(*listen)
    elif token:
        raise ValidationError("--token", "a token guards HTTP only; give --http too (stdio is "
                              "guarded by the process that starts the server)")
    backend = Backend(path, read_only=read_only, allow_provenance=allow_provenance, apps=apps,
                      embedder=embedder)
    try:
        server = build_server(backend, log_level=log_level)
        if listen is None:
            anyio.run(server.run_stdio_async)
        else:
            anyio.run(_serve_http, server, listen[0], listen[1], token, log_level, announce)
    finally:
        backend.close()


def _check_listen(host: str, port: int) -> None:
    """Refuse, in one line, an address the server could not listen on (a port in use, an
    address not on this machine), before the web server fails with a traceback."""
    import socket

    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the web server binds
        try:
            sock.bind((host, port))
        except OSError as e:
            raise ValidationError("--http", f"cannot listen on {host}:{port}: "
                                  f"{e.strerror or e}; is another server using that port? "
                                  "Pick another port, or 0 for a free one") from None


async def _serve_http(server: MCPServer, host: str, port: int, token: str | None, log_level: str,
                      announce: Any) -> None:
    import uvicorn

    app: Any = server.streamable_http_app(streamable_http_path=PATH, host=host)
    if token:
        app = BearerAuth(app, token)
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level.lower(), lifespan="on")
    web = uvicorn.Server(config)

    async def tell() -> None:  # once listening: the port actually bound (port 0 picks a free one)
        while not web.started:
            await anyio.sleep(0.02)
        bound = web.servers[0].sockets[0].getsockname()[1] if web.servers else port
        shown = f"[{host}]" if ":" in host else host
        print(f"braidlog mcp: serving http://{shown}:{bound}{PATH}"
              + (" (bearer token required)" if token else ""), file=announce, flush=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(tell)
        await web.serve()
        tg.cancel_scope.cancel()
