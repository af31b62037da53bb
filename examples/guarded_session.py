"""A guarded mcp session against a real mcp server on 127.0.0.1 (no other network).

fsm.adapters.mcp2.guarded_session wraps the official mcp 2.x ClientSession: your
elicitation callback runs at most once per server request, and is cancelled when the
server gives up on the request while the user is still deciding. The server is the
demo's (fsm.wire.server): its delete_files tool asks "Delete N files?" and waits for
the answer; its controller fires that question's deadline on command, so this run is
the same every time. Point guarded_session at your own server's URL instead.

Two calls: the first question is answered; the second is cancelled by the server while
its prompt is showing, so the prompt is withdrawn and the tool returns without deleting.

Run: python examples/guarded_session.py   (needs the mcp extra)
"""

import anyio
from mcp.types import ElicitResult

from fsm.adapters.mcp2 import guarded_session
from fsm.wire.server import running_server


async def main():
    async with running_server() as server:  # a real mcp 2.x server, 127.0.0.1, a free port
        prompt_up = anyio.Event()

        async def on_elicit(context, params):  # the same callback you give ClientSession
            print("asked:", params.message)
            if params.message == "Delete 1 files?":
                return ElicitResult(action="accept", content={"confirm": True})
            prompt_up.set()  # the user is still thinking about the second one
            try:
                await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                print("withdrawn:", params.message)  # the guard cancelled the prompt
                raise

        async def server_gives_up():
            await prompt_up.wait()
            await server.controller.fire_deadline()  # sends notifications/cancelled

        async with guarded_session(server.url, elicitation_callback=on_elicit) as session:
            result = await session.call_tool("delete_files", {"files": ["a.txt"]})
            print(result.content[0].text)

            async with anyio.create_task_group() as tg:
                tg.start_soon(server_gives_up)
                # deadline="cancel": when its deadline fires, this tool says so on the wire
                args = {"files": ["b.txt", "c.txt"], "deadline": "cancel"}
                result = await session.call_tool("delete_files", args)
            print(result.content[0].text)
            print("violations:", session.violations)  # P1-P7, checked online: none


anyio.run(main)
