"""The kit's pytest plugin, loaded by its entry point: ``--fsm-profile NAME`` picks the
kit's profile for a session without a conftest, and an unknown name is a usage error.

Each session runs in a child process (``runpytest_subprocess``): profiles are process-wide
state, and a child loads the plugin the way a user's pytest does, from the installed
package's entry point.
"""

from __future__ import annotations

import importlib.util

import pytest

import fsm.pytest_plugin as plugin
from fsm.testing import FAST, PROFILES, THOROUGH, kit_settings, use_profile

pytest_plugins = ["pytester"]

PROBE = """
from fsm.testing import conformance_machine, guard_factory, kit_settings


def test_the_kit_runs_under_{name}():
    expected = {expected}
    assert kit_settings().max_examples == expected
    machine = conformance_machine(guard_factory())  # as a test module builds one
    assert machine.TestCase.settings.max_examples == expected
"""


def probe(pytester: pytest.Pytester, profile: str) -> None:
    expected = kit_settings(profile).max_examples
    name = profile.replace("-", "_")
    pytester.makepyfile(**{f"test_{name}": PROBE.format(name=name, expected=expected)})


def test_the_plugin_is_loaded_by_its_entry_point(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--help")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*fsm conformance kit*", "*--fsm-profile=NAME*"])
    text = result.stdout.str()
    assert all(name in text for name in PROFILES)


@pytest.mark.parametrize("profile", PROFILES)
def test_the_option_picks_the_kits_profile_without_a_conftest(
    pytester: pytest.Pytester, profile: str
) -> None:
    probe(pytester, profile)
    result = pytester.runpytest_subprocess(f"--fsm-profile={profile}")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"fsm conformance kit: profile {profile}"])


def test_without_the_option_the_kit_runs_its_default(pytester: pytest.Pytester) -> None:
    probe(pytester, FAST)
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1)
    assert "fsm conformance kit" not in result.stdout.str()


def test_the_hypothesis_profile_option_finds_the_kits_profiles(
    pytester: pytest.Pytester,
) -> None:
    """The plugin registers the profiles before hypothesis's plugin loads one."""
    probe(pytester, THOROUGH)
    result = pytester.runpytest_subprocess(f"--hypothesis-profile={THOROUGH}")
    result.assert_outcomes(passed=1)


def test_an_unknown_profile_is_a_usage_error(pytester: pytest.Pytester) -> None:
    probe(pytester, FAST)
    result = pytester.runpytest_subprocess("--fsm-profile=fsm-nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*argument --fsm-profile: invalid choice: 'fsm-nope' (choose from *fsm-fast*)"]
    )
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert "passed" not in result.stdout.str()


def test_the_option_without_hypothesis_is_a_usage_error_naming_the_extra(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = pytester.parseconfig(f"--fsm-profile={FAST}")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == "hypothesis" else real(name, *args),
    )
    with pytest.raises(pytest.UsageError, match=r"pip install 'dead-or-resumable\[testing\]'"):
        plugin.pytest_configure(config)


def test_the_plugin_names_the_kits_profiles() -> None:
    """The plugin lists them without importing the kit; they must be the kit's."""
    assert plugin.PROFILES == PROFILES


def test_a_chosen_profile_yields_to_an_explicit_one_and_beats_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FSM_CONFORMANCE_PROFILE", FAST)
    use_profile(THOROUGH)
    thorough, fast = (kit_settings(name).max_examples for name in (THOROUGH, FAST))
    assert thorough != fast
    try:
        assert kit_settings().max_examples == thorough  # the option beats the environment
        assert kit_settings(FAST).max_examples == fast  # an explicit profile beats both
    finally:
        use_profile(None)
    assert kit_settings().max_examples == fast
    with pytest.raises(ValueError, match="unknown kit profile 'nope'"):
        use_profile("nope")
