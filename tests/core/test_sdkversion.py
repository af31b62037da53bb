"""Version ranges of the SDK adapters: parsing, containment, and the error that names them."""

from __future__ import annotations

from importlib import metadata

import pytest

from fsm.adapters.sdkversion import MCP1, MCP2, SdkRange, check_sdk_version, release_of


def test_release_parsing() -> None:
    assert release_of("2.3.0") == (2, 3, 0)
    assert release_of("2.1") == (2, 1, 0)
    assert release_of(" 1.30.0 ") == (1, 30, 0)
    for odd in ("2.0.0b1", "2.0.0.dev3", "2.0.0rc1", "", "two", "2.0.0+local"):
        assert release_of(odd) is None, odd


@pytest.mark.parametrize(
    ("version", "in_v2", "in_v1"),
    [
        ("2.0.0", True, False),
        ("2.3.0", True, False),
        ("2.99.1", True, False),
        ("3.0.0", False, False),
        ("2.0.0b1", False, False),
        ("1.30.0", False, True),
        ("1.24.0", False, True),
        ("1.23.3", False, False),
    ],
)
def test_ranges(version: str, in_v2: bool, in_v1: bool) -> None:
    assert (version in MCP2) is in_v2
    assert (version in MCP1) is in_v1


def test_ranges_are_named_as_pip_specifiers() -> None:
    assert str(MCP2) == "mcp>=2.0.0,<3.0.0"
    assert str(MCP1) == "mcp>=1.24.0,<2.0.0"


def test_error_names_both_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metadata, "version", lambda name: "1.30.0")
    with pytest.raises(RuntimeError) as info:
        check_sdk_version(MCP2, others=(MCP1,))
    text = str(info.value)
    assert "mcp>=2.0.0,<3.0.0" in text and "found mcp 1.30.0" in text
    assert f"for mcp>=1.24.0,<2.0.0 use {MCP1.adapter}" in text
    assert check_sdk_version(MCP2, others=(MCP1,), strict=False) == "1.30.0"


def test_error_without_a_serving_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metadata, "version", lambda name: "1.10.0")
    with pytest.raises(RuntimeError) as info:
        check_sdk_version(MCP2, others=(MCP1,))
    assert " use " not in str(info.value)


def test_missing_package_is_a_typed_error() -> None:
    missing = SdkRange("no-such-dist-fsm", (1, 0, 0), (2, 0, 0), "some.adapter")
    with pytest.raises(RuntimeError, match="not installed"):
        check_sdk_version(missing)
