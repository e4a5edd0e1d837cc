"""braidlog over the Model Context Protocol: ``braidlog mcp`` (docs/mcp.md).

Built on the official MCP SDK (``pip install '.[mcp]'``); only the CLI command imports
this package. ``serve(path, http=..., token=..., read_only=...)`` runs a server;
``build_server(Backend(path))`` gives the SDK's ``MCPServer`` to mount or test in process.
"""

from .backend import DEFAULT_ALLOWED, Backend
from .server import TOKEN_ENV, build_server, serve

__all__ = ["Backend", "DEFAULT_ALLOWED", "TOKEN_ENV", "build_server", "serve"]
