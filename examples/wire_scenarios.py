"""Every wire scenario against the unguarded mcp ClientSession and the guarded one.

fsm.wire runs each fault (the seed incident, a replayed cancellation, a server that
replays everything, a failed or rejected answer, a stream held half-open, an expired
session, and a control; in protocol 2026-07-28, a question's state that expires while it
is shown, a re-asked question and a server restart) against a real mcp server on
127.0.0.1 behind a fault proxy, with the client under test, and judges what the client
did by P1-P7 from the wire and the user's side. Put your own client factory beside the
two (see docs/testing.md, "On the wire") to see what it gets wrong.

Prints one line per scenario: what each client broke (or "passed"), how often the
question was presented, and how the call ended. Exits 1 if the guarded client broke
anything.

Run: python examples/wire_scenarios.py   (needs the mcp extra; a few seconds)
"""

import sys

from fsm.wire import SCENARIOS, guarded_client, plain_client, run_sync


def line(verdict):
    broke = "broke " + " ".join(sorted(verdict.broken)) if verdict.broken else "passed"
    shown = sum(verdict.presentations.values())
    ended = "completed" if verdict.outcome.kind == "result" else "failed"
    return f"{broke}, presented {shown}, {ended}"


def main():
    guarded_broke = False
    for name in SCENARIOS:
        plain = run_sync(name, plain_client)
        guarded = run_sync(name, guarded_client)
        guarded_broke |= not guarded.passed
        print(f"{name}:")
        print(f"  plain:   {line(plain)}")
        print(f"  guarded: {line(guarded)}")
    return 1 if guarded_broke else 0


if __name__ == "__main__":
    sys.exit(main())
