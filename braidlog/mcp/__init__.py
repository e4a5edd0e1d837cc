"""braidlog over the Model Context Protocol: ``braidlog mcp`` (docs/mcp.md).

Built on the official MCP SDK (``pip install '.[mcp]'``); only the CLI command imports
this package. ``serve(path, http=..., token=..., read_only=...)`` runs a server;
``build_server(Backend(path))`` gives the SDK's ``MCPServer`` to mount or test in process.
"""

from ..errors import MissingDependency

try:
    from .backend import DEFAULT_ALLOWED, Backend
    from .server import TOKEN_ENV, build_server, serve
except ImportError as e:  # the extra not installed: say which to install, not a bare ModuleNotFoundError
    if (e.name or "").split(".")[0] not in ("mcp", "starlette", "uvicorn", "anyio", "pydantic"):
        raise
    raise MissingDependency(f"braidlog.mcp needs the mcp extra, which is not "
                            f"installed here (no module {e.name}): pip install 'braidlog[mcp]' "
                            "(from a braidlog clone: pip install '.[mcp]')") from e

__all__ = ["Backend", "DEFAULT_ALLOWED", "TOKEN_ENV", "build_server", "serve"]
