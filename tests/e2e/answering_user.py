"""The user of the one-call adapters' end-to-end tests (MRTR and tasks): the elicitation
callback given to the real mcp 2.3.0 ``Client``, which accepts every question and runs the
test's fault while the prompt is up."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
from mcp import types

ACCEPT = types.ElicitResult(action="accept", content={})
"""What the user answers to every question."""


class User:
    """Records each prompt as ``(request id, message)``. On its first prompt (on every
    prompt, with ``every``) it runs ``fault``, awaiting what that returns if anything,
    then, with ``block``, waits until the prompt is taken down; then it accepts.
    ``withdrawn`` counts the prompts taken down (the callback cancelled) meanwhile."""

    def __init__(
        self,
        fault: Callable[[], Any] | None = None,
        *,
        block: bool = False,
        every: bool = False,
    ) -> None:
        self.prompts: list[tuple[str, str]] = []
        self.withdrawn = 0
        self.fault, self.block, self.every = fault, block, every

    async def __call__(self, ctx: Any, params: Any) -> types.ElicitResult:
        self.prompts.append((str(ctx.request_id), str(params.message)))
        if self.every or len(self.prompts) == 1:
            try:
                if self.fault is not None:
                    pending = self.fault()
                    if pending is not None:
                        await pending
                if self.block:
                    await anyio.Event().wait()
            except anyio.get_cancelled_exc_class():
                self.withdrawn += 1
                raise
        return ACCEPT
