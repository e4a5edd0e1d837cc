"""The official MCP SDK's client against ``braidlog mcp``: over stdio in a subprocess, or over HTTP
to a server process the tests start and stop; a store seeded for the tools."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is the braidlog[mcp] extra (the test extra has it)")

from anyio.from_thread import start_blocking_portal
from mcp import Client, StdioServerParameters

READ_TOOLS = {"head", "verify", "show", "history", "diff", "explain", "state_at", "recall", "kinds",
              "context_show", "context_replay",
              "search_decisions", "get_field", "list_memories", "episodes", "knots", "forks", "trust"}
WRITE_TOOLS = {"append", "record_decision", "supersede_decision", "draft_proposal",
               "accept_proposal", "reject_proposal", "revise_field", "add_memory"}


# ---------------------------------------------------------------------------------- harness

class Session:
    """One SDK ``Client``, connected through a real transport, called from synchronous code.

    The client lives in an event loop on a thread of its own (anyio's blocking portal), so
    tests stay plain functions and a module can share one server process. ``transport`` is a
    zero-argument function making what ``Client`` takes (built inside the loop)."""

    def __init__(self, transport: Any) -> None:
        self._transport = transport

    def __enter__(self) -> Session:
        self._stack = ExitStack()
        try:
            self.portal = self._stack.enter_context(start_blocking_portal())
            client = self.portal.call(lambda: Client(self._transport()))
            self.client = self._stack.enter_context(self.portal.wrap_async_context_manager(client))
            self.tools = {t.name: t for t in self.portal.call(self.client.list_tools).tools}
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stack.close()

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        """The CallToolResult (the client has checked structured content against the tool's
        output schema)."""
        return self.portal.call(self.client.call_tool, name, arguments or {})

    def ok(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """The structured result of a call that must succeed."""
        result = self.call(name, arguments)
        assert not result.is_error, result.content[0].text
        assert json.loads(result.content[0].text) == result.structured_content
        return result.structured_content

    def error(self, name: str, arguments: dict[str, Any] | None = None) -> str:
        """The text of a call that must fail as a tool error."""
        result = self.call(name, arguments)
        assert result.is_error, f"{name} succeeded: {result.structured_content}"
        assert result.structured_content is None
        return result.content[0].text

    def read(self, uri: str) -> Any:
        contents = self.portal.call(self.client.read_resource, uri).contents
        return json.loads(contents[0].text)

    def run(self, fn: Any, *args: Any) -> Any:
        """Run an async function in this session's event loop."""
        return self.portal.call(fn, *args)


def stdio(store: str | Path, *flags: str) -> Session:
    """A session with ``braidlog --store STORE mcp FLAGS`` started as a subprocess over stdio."""
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "braidlog", "--store", str(store), "mcp", *flags])
    return Session(lambda: params)


def seed(path: str | Path) -> str:
    """The demo session written into a new store, plus a namespace whose decisions are
    HUMAN_ONLY; the demo's braid id."""
    from braidlog import open as open_braid
    from braidlog.cli.demo import run_demo
    from braidlog.projections import decisions

    braid_id, _, _ = run_demo(str(path))
    with open_braid(str(path)) as braid:
        braid.execute("decisions", decisions.SetTrustBoundary(
            boundary=decisions.TrustBoundary.HUMAN_ONLY, namespace="guarded"),
            braid_id=braid_id, provenance="user")
    return braid_id


class HttpServer:
    """``braidlog mcp --http 127.0.0.1:0`` in a subprocess; ``url`` once it listens."""

    def __init__(self, store: str | Path, *flags: str, token: str | None = None) -> None:
        env = {k: v for k, v in os.environ.items() if k != "BRAIDLOG_MCP_TOKEN"}
        if token is not None:
            env["BRAIDLOG_MCP_TOKEN"] = token
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "braidlog", "--store", str(store), "mcp", "--http", "127.0.0.1:0",
             *flags], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while True:
            line = self.proc.stderr.readline()
            found = re.search(r"serving (http://\S+)", line)
            if found:
                self.url = found.group(1)
                break
            if not line and self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"the server did not start: {line}{self.proc.stderr.read()}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stderr.close()

    def session(self, token: str | None) -> Session:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        url = self.url

        def transport() -> Any:
            http = httpx2.AsyncClient(headers=headers, timeout=60)
            return _Owned(http, streamable_http_client(url, http_client=http))
        return Session(transport)


class _Owned:
    """A transport that closes the HTTP client it was given when it closes (the SDK does not
    close a client it did not create)."""

    def __init__(self, http: Any, transport: Any) -> None:
        self.http, self.transport = http, transport

    async def __aenter__(self) -> Any:
        return await self.transport.__aenter__()

    async def __aexit__(self, *exc: Any) -> Any:
        try:
            return await self.transport.__aexit__(*exc)
        finally:
            await self.http.aclose()


