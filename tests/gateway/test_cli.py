"""``fsm gateway``'s argument contract: every bad argument exits 2 with one line saying
why, before anything listens (the serving paths are the end-to-end tests')."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import NoReturn

import pytest

from fsm.gateway import cli
from fsm.gateway.ids import ENV_KEY

UPSTREAM = ["--upstream", "http://127.0.0.1:9/mcp"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--upstream", "ftp://x/mcp"], "upstream must be an http(s) URL"),
        ([*UPSTREAM, "--listen", "nowhere"], "--listen must be HOST:PORT"),
        ([*UPSTREAM, "--listen", "127.0.0.1:70000"], "--listen must be HOST:PORT"),
        ([*UPSTREAM, "--store", "postgres://x"], "--store must be memory or redis://"),
        (["--upstream", "http://u:pw@127.0.0.1:9/mcp"], "must not hold user:password@"),
        ([*UPSTREAM, "--namespace", "x"], "--namespace needs a redis:// store"),
        ([*UPSTREAM, "--store", "redis://127.0.0.1:9/0"], "must share the key that signs"),
        ([*UPSTREAM, "--store", "redis+cluster://127.0.0.1:9"], "must share the key that signs"),
        ([*UPSTREAM, "--store", "memory", "--store-file", "f"], "--store or --store-file"),
        ([*UPSTREAM, "--store-file", "/no/such/file"], "--store-file /no/such/file"),
        ([*UPSTREAM, "--max-event-bytes", "0"], "max_event_bytes must be >= 1"),
        ([*UPSTREAM, "--header-timeout", "0"], "header_timeout_s: 0.0 is not a finite number"),
        ([*UPSTREAM, "--ttl", "0"], "--ttl must be > 0"),
        ([*UPSTREAM, "--loop", "trio"], "invalid choice: 'trio'"),
        ([*UPSTREAM, "--http", "h2"], "invalid choice: 'h2'"),
        (["--listen", "127.0.0.1:0"], "the following arguments are required: --upstream"),
        ([*UPSTREAM, "--metrics", "nowhere"], "--metrics must be HOST:PORT"),
        ([*UPSTREAM, "--log-format", "xml"], "invalid choice: 'xml'"),
        ([*UPSTREAM, "--credential-header", "mcp-session-id"], "is not forwarded as it came"),
        ([*UPSTREAM, "--credential-header", "x key"], "is not a header name"),
    ],
)
def test_bad_arguments_exit_2_saying_why(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(args) == 2
    assert says in capsys.readouterr().err


SECONDS_OPTIONS = (
    "--ttl",
    "--header-timeout",
    "--keep-alive",
    "--body-timeout",
    "--lease",
    "--resume-patience",
    "--standalone-hold",
    "--drain-seconds",
)
"""Every option that is a number of seconds."""


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "soon"])
@pytest.mark.parametrize("option", SECONDS_OPTIONS)
def test_a_number_of_seconds_is_finite_and_not_negative(
    option: str, value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused as an argument, with argparse's line naming the option: nothing is built
    (a value accepted would otherwise start a gateway that serves until stopped)."""

    def built(*_: object) -> NoReturn:
        raise AssertionError(f"{option} {value} was accepted")

    monkeypatch.setattr(cli, "_build", built)
    assert cli.main([*UPSTREAM, option, value]) == 2
    err = capsys.readouterr().err
    assert f"argument {option}: {value!r} is not a finite number of seconds >= 0" in err


def test_every_option_of_seconds_is_read_by_one_type() -> None:
    """No option takes a bare ``float`` (which reads ``nan``, ``inf`` and ``-1``): a new
    option of seconds takes ``_seconds`` and joins :data:`SECONDS_OPTIONS`."""
    actions = cli._parser()._actions
    assert not [a.option_strings for a in actions if a.type is float]
    seconds = {o for a in actions if a.type is cli._seconds for o in a.option_strings}
    assert seconds == set(SECONDS_OPTIONS)


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


def test_a_password_in_a_store_url_never_reaches_a_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main([*UPSTREAM, "--store", "postgres://user:s3cret@db/0"]) == 2
    assert "s3cret" not in capsys.readouterr().err
    assert cli.main(["--upstream", "ftp://user:s3cret@x/mcp"]) == 2
    assert "s3cret" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+cluster://127.0.0.1:9/1", "Argument 'db' must be 0 or None"),
        ("redis+cluster://", "requires at least one node"),
    ],
)
def test_a_bad_cluster_url_exits_2_saying_why(
    url: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {cli.ENV_STORE: url, ENV_KEY: "k" * 40}
    assert cli.main(UPSTREAM, env) == 2
    assert says in capsys.readouterr().err


def test_a_cluster_url_makes_a_store_on_the_cluster_client() -> None:
    from redis.asyncio.cluster import RedisCluster

    env = {cli.ENV_STORE: "redis+cluster://:s3cret@127.0.0.1:9", ENV_KEY: "k" * 40}
    _app, _edge, store = cli._build(cli._parser().parse_args(UPSTREAM), env)
    assert isinstance(store.client, RedisCluster)
    assert repr(store) == "<RedisStore cluster 127.0.0.1:9 prefix='fsm:' ttl_s=3600>"


@pytest.mark.parametrize("where", ["env", "file"])
def test_the_store_url_and_the_id_key_come_from_the_environment_or_files(
    where: str, tmp_path: Path
) -> None:
    """The Redis URL (with its password) and the id key need not be on the command line,
    where ``ps`` shows them: the app is built from the environment or from files."""
    url = "redis://:s3cret@127.0.0.1:9/0"
    key = "k" * 40
    if where == "env":
        env = {cli.ENV_STORE: url, ENV_KEY: key}
        argv = [*UPSTREAM, "--namespace", "prod"]
    else:
        (tmp_path / "store").write_text(url + "\n")
        (tmp_path / "key").write_text(key + "\n" + "o" * 40 + "\n")
        env = {}
        argv = [*UPSTREAM, "--namespace", "prod", "--store-file", str(tmp_path / "store")]
        argv += ["--id-key-file", str(tmp_path / "key")]
    app, _edge, store = cli._build(cli._parser().parse_args(argv), env)
    assert app.id_keys.current == key.encode()
    assert app.id_keys.previous == (() if where == "env" else (b"o" * 40,))
    assert store.prefix == "fsm:prod:"
    assert "s3cret" not in repr(store)


def test_edge_and_gateway_limits_come_from_the_options() -> None:
    argv = [*UPSTREAM, "--max-header-bytes", "4096", "--max-headers", "20"]
    argv += ["--header-timeout", "2.5", "--keep-alive", "3", "--max-connections", "10"]
    argv += ["--max-event-bytes", "1000", "--body-timeout", "4", "--lease", "9"]
    argv += ["--resume-patience", "20", "--standalone-hold", "0"]
    argv += ["--allow-host", "mcp.example.com", "--allow-origin", "https://app.example.com"]
    app, edge, _store = cli._build(cli._parser().parse_args(argv), {})
    assert (edge.max_header_bytes, edge.max_headers, edge.header_timeout_s) == (4096, 20, 2.5)
    assert (edge.keep_alive_s, edge.max_connections) == (3, 10)
    limits = app.limits
    assert (limits.max_event_bytes, limits.body_timeout_s, limits.lease_s) == (1000, 4, 9)
    assert (app.config.resume_patience_s, limits.standalone_hold_s) == (20, 0)
    assert app.host_policy.allowed_hosts == ("mcp.example.com",)
    assert app.host_policy.allowed_origins == ("https://app.example.com",)
    argv += ["--credential-header", "X-Token", "--credential-header", "authorization"]
    defaults, _, _ = cli._build(cli._parser().parse_args(UPSTREAM), {})
    assert defaults.config.resume_patience_s == 150 and defaults.standalone_hold_s == 10


@pytest.mark.parametrize(("given", "held"), [([], 0), (["--standalone-hold", "5"], 5)])
def test_replicas_on_a_shared_store_open_no_get_ahead_unless_told(
    given: list[str], held: float
) -> None:
    """Behind a balancer without session affinity a GET opened ahead on one replica is
    one the client's GET on another cannot take: on a shared store it is off by default."""
    env = {cli.ENV_STORE: "redis://127.0.0.1:9/0", ENV_KEY: "k" * 40}
    app, _edge, _store = cli._build(cli._parser().parse_args([*UPSTREAM, *given]), env)
    assert app.standalone_hold_s == held


def test_the_command_exits_1_when_the_gateways_own_work_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A defect in the gateway's background work (here its lease renewal raises) must not
    leave a process that is up but serves only errors: the command stops with status 1,
    saying why, so a supervisor restarts it."""
    from fsm.gateway.app import Gateway

    async def broken(self: Gateway) -> None:
        raise RuntimeError("a defect in the gateway's own work")

    monkeypatch.setattr(Gateway, "_keep_alive", broken)
    assert cli.main([*UPSTREAM, "--listen", "127.0.0.1:0"]) == 1
    assert "the gateway failed" in capsys.readouterr().err


def test_the_upstream_librarys_request_log_is_kept_quiet_at_info() -> None:
    """httpx2 logs each request's URL (a client's query string with it) at INFO; the
    command's logging keeps that logger at WARNING even at ``--log-level info``."""
    import logging

    quiet = logging.getLogger("httpx2")
    before = quiet.level
    try:
        quiet.setLevel(logging.NOTSET)
        cli._logging("info")
        assert not quiet.isEnabledFor(logging.INFO)
    finally:
        quiet.setLevel(before)
