"""The user of the one-call adapters' store tests: accepts every question and records,
for each prompt, the request id it was asked under and whether it came marked as re-shown
after a restart (``RESHOWN_META``, the same key for the MRTR and tasks adapters)."""

from __future__ import annotations

import anyio
from mcp import types
from mcp.client.session import ClientRequestContext

from fsm.adapters._stored import RESHOWN_META


class User:
    def __init__(self) -> None:
        self.prompts: list[tuple[str, bool]] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        meta = context.meta or {}
        self.prompts.append((str(context.request_id), bool(meta.get(RESHOWN_META))))
        await anyio.sleep(0)
        return types.ElicitResult(action="accept", content={})
