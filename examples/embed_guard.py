"""Embed the sans-IO guard in your client: feed it what happened, do what it says.

The guard does no IO and reads no clock of its own: your client reports each thing that
happened on the wire as an event (fsm.events) and carries out the actions it gets back
(fsm.actions). Here the wire is a script and the clock is a number, so the run is the
same every time; in your client the events come from your HTTP and SSE code, and the
clock is time.monotonic.

The script: a tool call's stream carries a question, which the server then cancels; a
second question; the connection breaks; by the time the client has resumed, 45 s have
passed and the server replays the second question without saying it is still live. The
guard withdraws the first prompt, resumes from the newest event id, takes the replay as
dead (past its 30 s deadline) and ends the call with one typed error; the user's late
answer is dropped, not sent.

Run: python examples/embed_guard.py
"""

from fsm import Guard, GuardConfig
from fsm import actions as act
from fsm import events as ev


class Clock:
    """A clock you move by hand (the guard calls it; pass time.monotonic in a real client)."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Client:
    """Your client's side of each action: it shows and hides dialogs, and does HTTP."""

    def __init__(self, guard):
        self.guard = guard
        self.dialogs = {}  # request key -> the question on screen
        self.timers = []  # events to feed when a delay elapses (your event loop's job)

    def feed(self, event):
        for action in self.guard.feed(event):
            self.act(action)

    def act(self, action):
        match action:
            case act.Present(key, _method, params):  # at most once per request key
                self.dialogs[key] = params["message"]
                print(f"show dialog {key}: {params['message']}")
            case act.Withdraw(key, reason):  # the request died while on screen
                print(f"hide dialog {key}: {self.dialogs.pop(key)} ({reason})")
            case act.Submit(key, answer, attempt, delay_s):  # after delay_s, in the background
                print(f"POST {answer} for {key} (attempt {attempt}, in {delay_s} s)")
            case act.Wait(stream, delay_s):
                print(f"wait {delay_s} s before resuming {stream}")
                self.timers.append(ev.TimerFired(stream))
            case act.Resume(stream, cursor):
                print(f"GET {stream} with Last-Event-ID: {cursor}")
            case act.Complete(interaction):
                print(f"{interaction} completed")
            case act.Fail(interaction, error):  # once; error: an InteractionFailed subclass
                print(f"{interaction} failed: {type(error).__name__} ({error.reason})")
            case act.Ignore(reason, _detail):
                print(f"ignored: {reason}")
            case act.Refuse(key, error):  # a flood of requests over the guard's cap
                print(f"refused {key}: {error}")


def ask(request_id, message):
    """A server request as it arrives on an SSE stream (JSON-RPC)."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "elicitation/create",
        "params": {"message": message},
    }


def cancel(request_id):
    """The server's notice that it gave up on a request."""
    params = {"requestId": request_id, "reason": "timed out"}
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}


clock = Clock()
client = Client(Guard(config=GuardConfig(request_ttl_s=30.0), clock=clock))
session = "4f1c"  # the server's Mcp-Session-Id; a request's key is (session, JSON-RPC id)

client.feed(ev.SessionStarted(session))
client.feed(ev.StreamOpened("post:7", origin=7))  # the SSE stream of tools/call id 7
client.feed(ev.SseEvent("post:7", ask(1, "Delete 3 files?"), event_id="e1"))
client.feed(ev.SseEvent("post:7", cancel(1), event_id="e2"))
client.feed(ev.SseEvent("post:7", ask(2, "Delete 2 files?"), event_id="e3"))
client.feed(ev.StreamLost("post:7", clean=False))  # the connection broke
clock.now = 45.0  # the network was down for a while
client.feed(client.timers.pop())  # the delay elapsed: the guard says where to resume from
client.feed(ev.StreamResumed("post:7"))  # the GET answered 200 with an event stream
client.feed(ev.SseEvent("post:7", ask(2, "Delete 2 files?"), event_id="e3"))  # the replay
client.feed(ev.UserAnswered((session, 2), {"action": "accept"}))  # the user clicks anyway
