"""The library keeps other libraries' INFO logging out of the embedding application: the
guard's ``transitions`` runtime does not log per trigger, and building the harness's MCP
server leaves the root logger as it was. Each case runs in a fresh interpreter, whose
logging starts unconfigured, as an application's does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

GUARD_AT_INFO = """
import logging, sys
{before}
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(name)s: %(message)s")
from fsm import Guard, events as ev
guard = Guard(clock=lambda: 0.0, engine="transitions")
guard.feed(ev.SessionStarted("s1"))
guard.feed(ev.StreamOpened("post:1", origin=1))
request = {{"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": {{}}}}
assert guard.feed(ev.SseEvent("post:1", request, "e1"))
logging.getLogger("app").info("the application's own line")
"""


def _python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_an_application_logging_at_info_sees_only_its_own_lines() -> None:
    out = _python(GUARD_AT_INFO.format(before=""))
    assert out == "app: the application's own line\n"


def test_an_application_that_asks_for_transitions_logs_gets_them() -> None:
    before = 'logging.getLogger("transitions").setLevel(logging.INFO)'
    out = _python(GUARD_AT_INFO.format(before=before))
    assert "transitions.core: Finished processing state" in out


def test_building_the_harness_server_leaves_root_logging_alone() -> None:
    out = _python(
        "import logging\n"
        "from fsm.wire.server import ServerController, build_server\n"
        "root = logging.getLogger()\n"
        "before = (root.level, list(root.handlers))\n"
        "build_server(ServerController())\n"
        "print(before == (root.level, list(root.handlers)), len(root.handlers))\n"
    )
    assert out == "True 0\n"
