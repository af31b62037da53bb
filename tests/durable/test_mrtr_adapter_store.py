"""The MRTR adapter with a store, end to end: the real mcp 2.x ``Client`` against the
loopback MRTR server on 127.0.0.1. The process "dies" before each store write (the
store's ``before_write`` raises, the call is abandoned, the file closed) and a second
``guarded_call_tool`` with the same file and call id goes on: the question reaches the
callback once, again at most once marked as re-shown, and the call ends with its result."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import types
from pydantic import ValidationError
from recording_user import User

from fsm.adapters.mrtr import guarded_call_tool
from fsm.durable import SqliteStore
from fsm.durable.store import Written
from fsm.errors import InteractionFailed
from fsm.questions import canonical_json
from fsm.wire.mrtr_server import MrtrServer, running_mrtr_server
from fsm.wire.sdk import modern_client

pytestmark = pytest.mark.anyio

TOOL, ARGS = "reasking_delete", {"count": 3, "reasks": 1}
WRITES = 4
"""The question, its answer, the re-ask's resubmission, the end."""


class Died(Exception):
    """The process ended here."""


def text(result: Any) -> str:
    assert isinstance(result, types.CallToolResult)
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


@pytest.fixture
async def server() -> AsyncIterator[MrtrServer]:
    async with running_mrtr_server(ttl=30.0) as srv:
        yield srv


async def attempt(
    url: str, path: Path, user: User, die_at: int | None, writes: list[int] | None = None
) -> Any:
    """One process's try at the call: its result, or what it raised (caught inside the
    ``Client``, which would wrap it in a group); ``writes`` gets the number of store
    writes it made."""
    written = 0

    def before_write(delta: Written) -> None:
        nonlocal written
        if written == die_at:
            raise Died
        written += 1

    with SqliteStore(path, before_write=before_write) as store:
        async with modern_client(url, elicitation_callback=user) as client:
            try:
                return await guarded_call_tool(client, TOOL, ARGS, store=store, call_id="turn-1")
            except Exception as exc:
                return exc
            finally:
                if writes is not None:
                    writes.append(written)


async def test_without_a_crash_it_writes_each_decision(server: MrtrServer, tmp_path: Path) -> None:
    user, writes = User(), []
    result = await attempt(server.url, tmp_path / "p.sqlite3", user, None, writes)
    assert text(result) == "Deleted 3 files after 2 answers"
    assert writes == [WRITES]  # each is a crash point the next test kills before
    assert [shown for _, shown in user.prompts] == [False]
    with SqliteStore(tmp_path / "p.sqlite3") as store:
        assert store.calls()["turn-1"].ended


@pytest.mark.parametrize("die_at", range(WRITES))
async def test_a_crash_before_each_write_never_asks_an_answered_question(
    server: MrtrServer, tmp_path: Path, die_at: int
) -> None:
    user, path = User(), tmp_path / "p.sqlite3"
    died = await attempt(server.url, path, user, die_at)
    assert isinstance(died, ExceptionGroup) and died.subgroup(Died) is not None
    result = await attempt(server.url, path, user, None)
    assert isinstance(result, types.CallToolResult), result
    assert text(result).startswith("Deleted 3 files")
    fresh = [p for p, reshown in user.prompts if not reshown]
    again = [p for p, reshown in user.prompts if reshown]
    assert len(fresh) == 1, user.prompts
    # on screen at the crash (recorded, unanswered): shown once more, marked; otherwise
    # never recorded (so never shown) or answered on disk: never shown again
    assert again == (fresh if die_at == 1 else [])


async def test_a_call_whose_end_was_recorded_fails_once_typed(
    server: MrtrServer, tmp_path: Path
) -> None:
    user, path = User(), tmp_path / "p.sqlite3"
    await attempt(server.url, path, user, None)
    ended = await attempt(server.url, path, user, None)
    assert isinstance(ended, InteractionFailed) and ended.reason == "ended-before-restart"
    assert len(user.prompts) == 1


async def test_a_stored_question_the_sdk_cannot_parse_is_not_blamed_on_the_callback(
    server: MrtrServer, tmp_path: Path
) -> None:
    """The question on screen at the crash is stored without the ``message`` an
    elicitation needs (a store another SDK version wrote, or edited): its restart ends the
    call saying the SDK cannot parse it, chained to the SDK's error, never that the
    callback raised, and the callback is not called for it."""
    user, path = User(), tmp_path / "p.sqlite3"
    await attempt(server.url, path, user, 1)  # the question written, its answer not
    with SqliteStore(path) as store:
        record = store.call("turn-1")
        assert record is not None
        (question,) = record.questions
        assert question.params is not None
        params = json.loads(question.params)
        del params["message"]
        spoiled = question._replace(params=canonical_json(params))
        store.write(record._replace(questions=(spoiled,)))
    failed = await attempt(server.url, path, user, None)
    assert isinstance(failed, InteractionFailed) and failed.reason == "cancelled", failed
    assert "the SDK cannot parse input request" in str(failed)
    assert "callback" not in str(failed)
    assert isinstance(failed.__cause__, ValidationError)
    assert [shown for _, shown in user.prompts] == [False]  # never shown again
