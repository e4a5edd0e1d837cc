"""Fixtures for the tests of the MCP server through the official SDK's client, over stdio and HTTP."""
