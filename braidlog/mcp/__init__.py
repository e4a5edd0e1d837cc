"""braidlog over the Model Context Protocol: ``braidlog mcp`` (docs/mcp.md).

Built on the official MCP SDK (``pip install '.[mcp]'``); only the CLI command imports
this package. ``serve(path, http=..., token=..., read_only=...)`` runs a server;
``build_server(Backend(path))`` gives the SDK's ``MCPServer`` to mount or test in process.
"""

from ..errors import require_extra

try:
    from .backend import DEFAULT_ALLOWED, Backend
    from .server import TOKEN_ENV, build_server, serve
except ImportError as e:  # the extra not installed: say which to install, not a bare ModuleNotFoundError
    require_extra(e, "braidlog.mcp", "mcp", ("mcp", "mcp_types", "starlette", "uvicorn", "anyio", "pydantic", "httpx2"))

__all__ = ["Backend", "DEFAULT_ALLOWED", "TOKEN_ENV", "build_server", "serve"]
