"""fastmcp 4.x's ``Client`` against the guard, method by method
(:mod:`support.fastmcp_surface`; 3.x: ``tests/e2e_v1/test_fastmcp3_surface.py``).

Every public coroutine method of the installed ``Client`` is classified: a request raced
through ``GuardedConnection.call(..., method=...)`` (the JSON-RPC method that decides it),
or not raced, with the reason; a method a new fastmcp release adds fails here until it is
classified. Over real HTTP on 127.0.0.1, each request method, run once through the guarded
connection, reaches the harness server through the guard (the guard saw the stream of
every request the fault proxy passed) and ends with its result or one exception; the
Skills methods send nothing on a guarded (2025-era) connection.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastmcp")

from fastmcp import Client
from mcp import MCPError

from support.fastmcp_clients import plain_fastmcp
from support.fastmcp_surface import (
    NOT_RACED,
    RACED,
    SKILLS,
    calls,
    problems,
    race_each,
    unclassified,
)
from support.scenarios import Rig
from support.surface import coroutine_methods

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(60)]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "adapter.md"


def test_every_public_coroutine_method_of_the_client_is_classified() -> None:
    assert unclassified(Client) == set()
    assert not set(RACED) & set(NOT_RACED)
    assert set(calls(Client)) == coroutine_methods(Client) & (set(RACED) | SKILLS)


def test_a_method_a_new_fastmcp_release_adds_fails_the_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def list_widgets(self: Client) -> None:
        """A request method of a fastmcp release to come."""

    monkeypatch.setattr(Client, "list_widgets", list_widgets, raising=False)
    assert unclassified(Client) == {"list_widgets"}


def test_every_classification_is_documented() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert [name for name in (*RACED, *NOT_RACED) if f"`{name}`" not in text] == []


async def test_each_request_method_reaches_the_server_through_the_guard_and_ends_once(
    rig: Rig,
) -> None:
    records = await race_each(rig, calls(Client))
    assert problems(records) == []
    assert records["call_tool"].result.content[0].text == "pong"
    assert records["get_prompt"].result.messages[0].content.text == "Hello, Ada!"
    # the server has no logging and no skill resources: the SDK's error, once
    assert isinstance(records["set_logging_level"].error, MCPError)
    assert isinstance(records["read_skill"].error, MCPError)
    assert [m for m, _ in records["call_tool"].sent] == ["tools/call", "tools/list"]
    assert [name for name, r in records.items() if r.error is not None] == [
        "set_logging_level",
        *sorted(SKILLS),
        "read_skill",
    ]


async def test_the_check_fails_on_a_wrong_method_and_on_a_request_past_the_guard(
    rig: Rig,
) -> None:
    """A call that sends another method than its row says, and one sent by a client not
    on the guarded connection, are both reported."""
    async with plain_fastmcp(rig.env()) as plain:
        unguarded: Any = plain
        records = await race_each(
            rig,
            {
                "list_tools": lambda c: c.ping(),
                "list_prompts": lambda c: unguarded.client.list_prompts(),
            },
        )
    wrong = problems(records)
    assert wrong[0] == "list_tools: sent ['ping'], not tools/list"
    assert wrong[1].startswith("list_prompts: ids [") and "unseen by the guard" in wrong[1]
    assert len(wrong) == 2
