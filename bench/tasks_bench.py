"""Tasks (``io.modelcontextprotocol/tasks``): what the task rules cost per poll and per
question.

``poll``: one ``tasks/get`` result fed to :class:`fsm.tasks.task.TaskCall` in the steady
state of a task waiting for the user: ``input_required`` listing keys already presented
(1 and 10 keys); the rules check the shape, look each key up, keep the TTL and emit the
next :class:`~fsm.tasks.task.Poll`. Median over ``POLLS`` polls per run, ``REPEATS`` runs
(target <= 50 us per poll on the default engine).

``question``: the whole life of one question: the poll that lists its new key (presented
once), the user's answer (one ``Update``), the empty ack, and the poll that no longer
lists the key (consumed). ``QUESTIONS`` questions per task, from a fresh task per run;
the figure is the median per question, on the compiled tables (``TaskCall``'s default
engine) and on the ``transitions`` runtime, next to the bare cost of building the same
events.
"""

from __future__ import annotations

import datetime
import statistics
import time
from typing import Any

from bench.results import record, table
from fsm import events as ev
from fsm.tasks.task import Polled, TaskCall, TaskConfig, TaskCreated, UpdateAcked

POLLS = 200
QUESTIONS = 10
REPEATS = 100
TARGET_US = 50.0
ANSWER = {"action": "accept", "content": {}}
CONFIG = TaskConfig(max_polls=10_000, max_keys=4096)
CREATED = datetime.datetime.now(datetime.UTC).isoformat()


def _ask(n: int) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {"message": f"Question {n + 1}?", "requestedSchema": {}},
    }


def _result(keys: range | list[int], status: str = "input_required") -> dict[str, Any]:
    body: dict[str, Any] = {
        "taskId": "bench",
        "status": status,
        "ttlMs": 3_600_000,
        "createdAt": CREATED,
        "pollIntervalMs": 1000,
    }
    if status == "input_required":
        body["inputRequests"] = {f"k{n}": _ask(n) for n in keys}
    return body


def _task(engine: str) -> TaskCall:
    task = TaskCall("bench", clock=time.time, config=CONFIG, engine=engine)  # type: ignore[arg-type]
    task.feed(TaskCreated(_result([], "working")))
    return task


def _polls(keys: int, engine: str) -> float:
    """Seconds per poll listing ``keys`` keys already presented."""
    task = _task(engine)
    event = Polled(_result(range(keys)))
    task.feed(event)  # presents them
    started = time.perf_counter()
    for _ in range(POLLS):
        task.feed(event)
    return (time.perf_counter() - started) / POLLS


def _questions(engine: str) -> float:
    """Seconds per question over a task asking ``QUESTIONS`` questions one by one."""
    lists = [Polled(_result([n])) for n in range(QUESTIONS)]
    moved_on = Polled(_result([], "working"))
    started = time.perf_counter()
    task = _task(engine)
    for n, listed in enumerate(lists):
        task.feed(listed)
        task.feed(ev.UserAnswered(("bench", f"k{n}"), ANSWER))
        task.feed(UpdateAcked())
        task.feed(moved_on)
    return (time.perf_counter() - started) / QUESTIONS


def _bare() -> float:
    started = time.perf_counter()
    for n in range(QUESTIONS):
        Polled(_result([n]))
        ev.UserAnswered(("bench", f"k{n}"), ANSWER)
        UpdateAcked()
        Polled(_result([], "working"))
    return (time.perf_counter() - started) / QUESTIONS


def bench() -> dict[str, float]:
    out: dict[str, float] = {}
    for engine in ("tables", "transitions"):
        for keys in (1, 10):
            runs = [_polls(keys, engine) for _ in range(REPEATS)]
            out[f"poll_{keys}_{engine}"] = statistics.median(runs) * 1e6
        runs = [_questions(engine) for _ in range(REPEATS)]
        out[f"question_{engine}"] = statistics.median(runs) * 1e6
    out["bare"] = statistics.median(_bare() for _ in range(REPEATS)) * 1e6
    return out


def main() -> None:
    b = bench()
    table(
        [
            ("poll, 1 key listed, compiled tables", b["poll_1_tables"]),
            ("poll, 10 keys listed, compiled tables", b["poll_10_tables"]),
            ("poll, 1 key listed, transitions runtime", b["poll_1_transitions"]),
            ("poll, 10 keys listed, transitions runtime", b["poll_10_transitions"]),
            ("question (present, answer, ack, consumed), tables", b["question_tables"]),
            ("question, transitions runtime", b["question_transitions"]),
            ("build one question's events (bare)", b["bare"]),
        ],
        header=("TaskCall", "us"),
    )
    worst = max(b["poll_1_tables"], b["poll_10_tables"])
    verdict = "meets" if worst <= TARGET_US else "misses"
    print(f"TaskCall's default engine {verdict} the target of {TARGET_US:g} us/poll")
    record("tasks_poll_1_key_us", round(b["poll_1_tables"], 2), "us")
    record("tasks_poll_10_keys_us", round(b["poll_10_tables"], 2), "us")
    record("tasks_question_us_tables", round(b["question_tables"], 2), "us")
    record("tasks_question_us_transitions", round(b["question_transitions"], 2), "us")


if __name__ == "__main__":
    main()
