"""The audit judges a task run's event log by the same properties as the tasks kit: the
kit's own record of a run (:attr:`TasksConformanceMachine.log`), written as a schema-3
log naming the ``tasks`` era, is audited by ``fsm audit``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fsm import trace
from fsm.audit import audit_text, main
from fsm.testing.tasks_kit import (
    TasksClientFactory,
    TasksConformanceMachine,
    tasks_conformance_machine,
)
from support.tasks_clients import RepollingRequester, guarded_task


def kit(factory: TasksClientFactory) -> TasksConformanceMachine:
    """One question; nothing fails the run (the log is what is judged)."""
    return tasks_conformance_machine(factory, questions=1, check=())()


def guarded_run() -> TasksConformanceMachine:
    """The task rules through a supersession, a lost update, a re-ask of the answered
    question under a new key (answered from the store) and the task's completion."""
    k = kit(guarded_task)
    k.server_answers_poll()  # k0 presented
    k.server_supersedes(0)  # k0 -> k1
    k.server_answers_poll()  # k0 withdrawn, k1 presented
    k.user_answers(0)  # update k1
    k.server_answers_update("lose")
    k.server_answers_poll()  # k1 still listed: its answer resent
    k.server_answers_update("ack")
    k.server_takes_answers(True)  # k1 taken, the question re-asked as k2
    k.server_answers_poll()  # k1 consumed; k2 answered from the store
    k.server_answers_update("ack")
    k.server_takes_answers(False)
    k.server_completes()
    k.teardown()
    assert k.ended == 1 and not k.violated
    return k


def repolling_run() -> TasksConformanceMachine:
    """A requester with ext-tasks 0.2.2's ledger in a loop that polls on after a failed
    update: the update is lost, the key it released presented again."""
    k = kit(RepollingRequester)
    k.server_answers_poll()
    k.user_answers(0)
    k.server_answers_update("lose")
    k.server_answers_poll()
    return k


def test_a_guarded_task_run_conforms(tmp_path: Path) -> None:
    log = tmp_path / "task.jsonl"
    log.write_text(trace.dumps(guarded_run().log, era="tasks"), encoding="utf-8")
    assert json.loads(log.read_text().splitlines()[0])["era"] == "tasks"
    assert main([str(log), "--complete"]) == 0


def test_a_key_presented_again_after_a_failed_update_is_p2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "repolling.jsonl"
    log.write_text(trace.dumps(repolling_run().log, era="tasks"), encoding="utf-8")
    assert main([str(log), "--json"]) == 1
    finding = json.loads(capsys.readouterr().out)["violation"]
    assert finding["property"] == "P2"
    assert finding["why"].startswith("('task', 'k0') presented a second time")
    assert finding["record"]["kind"] == "presented" and finding["record"]["key"] == ["task", "k0"]


def test_the_era_picks_the_key_machine() -> None:
    """Judged by the SSE liveness machine, the store's answer to a re-ask (a submission
    of a key never presented) looks impossible; the tasks era's machine has the reuse."""
    run = guarded_run().log
    assert audit_text(trace.dumps(run, era="tasks")).ok
    sse = audit_text(trace.dumps(run))
    assert sse.finding is not None and sse.finding.name == "M"
    assert "liveness of ('task', 'k2')" in sse.finding.why


def test_a_header_naming_an_unknown_era_is_malformed(tmp_path: Path) -> None:
    log = tmp_path / "bad.jsonl"
    text = trace.dumps(guarded_run().log, era="tasks").replace('"era": "tasks"', '"era": "x"')
    log.write_text(text, encoding="utf-8")
    assert main([str(log)]) == 2
    with pytest.raises(ValueError, match="unknown era"):
        trace.header(era="x")
