"""``fsm gateway``'s argument contract: every bad argument exits 2 with one line saying
why, before anything listens (the serving paths are the end-to-end tests')."""

from __future__ import annotations

import importlib.util

import pytest

from fsm.gateway import cli

UPSTREAM = ["--upstream", "http://127.0.0.1:9/mcp"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--upstream", "ftp://x/mcp"], "upstream must be an http(s) URL"),
        ([*UPSTREAM, "--listen", "nowhere"], "--listen must be HOST:PORT"),
        ([*UPSTREAM, "--listen", "127.0.0.1:70000"], "--listen must be HOST:PORT"),
        ([*UPSTREAM, "--store", "postgres://x"], "--store must be memory or redis://"),
        ([*UPSTREAM, "--ttl", "0"], "--ttl must be > 0"),
        ([*UPSTREAM, "--loop", "trio"], "invalid choice: 'trio'"),
        ([*UPSTREAM, "--http", "h2"], "invalid choice: 'h2'"),
        (["--listen", "127.0.0.1:0"], "the following arguments are required: --upstream"),
    ],
)
def test_bad_arguments_exit_2_saying_why(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(args) == 2
    assert says in capsys.readouterr().err


@pytest.mark.parametrize(("option", "module"), [("--loop", "uvloop"), ("--http", "httptools")])
def test_asking_for_a_loop_or_parser_that_is_not_installed_exits_2(
    option: str, module: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a)
    )
    assert cli.main([*UPSTREAM, option, module]) == 2
    assert f"{option} {module}: {module} is not installed" in capsys.readouterr().err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--loop {auto,asyncio,uvloop}" in out and "--http {auto,h11,httptools}" in out
