"""The conformance kit's pytest plugin: ``pytest --fsm-profile NAME``, no conftest needed.

Installed with the package (entry point ``fsm`` in the ``pytest11`` group), so pytest
loads it wherever ``dead-or-resumable`` is installed, the ``testing`` extra or not. It
adds one option:

``--fsm-profile {fsm-fast,fsm-thorough}``
    Run every conformance test of the session under that kit profile: it is what
    :func:`fsm.testing.kit_settings` returns when not given a profile (a
    :class:`~fsm.testing.ConformanceTests` class without ``profile`` or
    ``hypothesis_settings``, a machine built by :func:`~fsm.testing.conformance_machine`).
    A class's own ``profile`` or ``hypothesis_settings`` still wins. Other hypothesis
    tests of the session keep their own settings. Any other name is a usage error
    (exit status 4) that lists the choices.

The plugin also registers the kit's profiles with hypothesis before hypothesis's own
plugin loads one, so ``--hypothesis-profile=fsm-thorough`` works without a conftest too.

Contract: without either option the plugin imports nothing beyond pytest (pytest's
start-up does not pay for the kit); with one, it imports :mod:`fsm.testing`, and when
hypothesis is not installed that is a usage error naming the ``testing`` extra.

Limit: because the distribution registers a ``pytest11`` entry point, pytest rewrites the
``assert`` statements of every ``fsm`` module a test session imports (from an installed
wheel; not from an editable install), as it does for any plugin's distribution: a failing
assertion inside ``fsm`` reads like a test's, and the modules' globals gain pytest's
helper names (``@py_builtins``, ``@pytest_ar``). ``-p no:fsm`` does not stop that;
``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`` does (and loads no entry-point plugin at all).
"""

from __future__ import annotations

import importlib.util

import pytest

__all__ = ["PROFILES", "pytest_addoption", "pytest_configure", "pytest_report_header"]

PROFILES = ("fsm-fast", "fsm-thorough")
"""The kit's profiles (:data:`fsm.testing.PROFILES`), named here so that the option and
its ``--help`` exist without hypothesis."""

OPTION = "--fsm-profile"


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--fsm-profile`` to the ``fsm conformance kit`` group."""
    group = parser.getgroup("fsm", "fsm conformance kit")
    group.addoption(
        OPTION,
        dest="fsm_profile",
        default=None,
        choices=PROFILES,
        metavar="NAME",
        help=(
            "run the conformance kit's tests under this profile: "
            f"{' or '.join(PROFILES)} (default: {PROFILES[0]}, or $FSM_CONFORMANCE_PROFILE)"
        ),
    )


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Register the kit's profiles and apply ``--fsm-profile`` (before hypothesis's
    plugin loads ``--hypothesis-profile``)."""
    chosen = config.getoption("fsm_profile", None)
    hypothesis_profile = config.getoption("hypothesis_profile", None)
    if chosen is None and hypothesis_profile not in PROFILES:
        return
    if importlib.util.find_spec("hypothesis") is None:
        raise pytest.UsageError(
            f"{OPTION if chosen else '--hypothesis-profile=' + str(hypothesis_profile)} "
            "needs hypothesis: pip install 'dead-or-resumable[testing]'"
        )
    from fsm.testing import kit  # registers the kit's profiles with hypothesis

    if chosen is not None:
        kit.use_profile(chosen)
        config.add_cleanup(lambda: kit.use_profile(None))


def pytest_report_header(config: pytest.Config) -> str | None:
    """Say which kit profile the session runs under, when one was chosen."""
    chosen = config.getoption("fsm_profile", None)
    return f"fsm conformance kit: profile {chosen}" if chosen else None
