"""The wire scenarios: faults on a real loopback MCP server, runnable against any client."""

from __future__ import annotations

__all__: list[str] = []
