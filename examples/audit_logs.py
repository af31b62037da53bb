"""Audit recorded event logs with ``fsm audit``: the same properties, checked after the fact.

A client that embeds the guard through fsm.adapters writes its event log as JSON Lines
(``guarded_session(..., log="events.jsonl")``; the schema is in fsm/trace.py: one record
per thing the client was told or did). ``fsm audit`` replays a log through the property
monitor and reports the first record that breaks P1-P7, or that no run of the declared
machines could produce.

The two logs in examples/logs/ record the same seed incident: a question is shown and
answered, the stream breaks, the client resumes and the server replays the question.
The guarded client (guarded.jsonl) does not show the replay; a client that shows every
delivery (naive.jsonl) shows it again, and the audit names that record (P2).

Run: python examples/audit_logs.py   (from any directory)
"""

import json
import subprocess
import sys
from pathlib import Path

LOGS = Path(__file__).resolve().parent / "logs"


def audit(log, *options):
    """Run ``fsm audit`` (the same as ``python -m fsm audit``) on one log."""
    done = subprocess.run(
        [sys.executable, "-m", "fsm", "audit", *options, str(log)],
        capture_output=True,
        text=True,
    )
    return done.returncode, done.stdout


# --complete: the log is the whole run, so every tool call must also have ended (P5).
# Exit status: 0 conforms, 1 a violation, 2 a malformed or empty log.
for name in ("guarded.jsonl", "naive.jsonl"):
    status, text = audit(LOGS / name, "--complete")
    first = text.splitlines()[0].replace(str(LOGS) + "/", "")  # the verdict line
    print(f"exit {status}: {first}")

# --json prints one object, for a program to read: the first violation, where and why.
status, text = audit(LOGS / "naive.jsonl", "--complete", "--json")
violation = json.loads(text)["violation"]
print(f"line {violation['line']}: {violation['property']}, {violation['why']}")
print("the record:", json.dumps(violation["record"], sort_keys=True))
