"""A conformance kit for MCP clients: hypothesis plays server, network and user.

Point it at your client through the guard's own vocabulary (a ``feed(event) ->
Sequence[Action]`` object built by ``factory(clock)``) and it checks P1-P7 and the
bounded L1 of :mod:`fsm.properties` after every step::

    from fsm.testing import ConformanceTests

    class TestMyClient(ConformanceTests):
        client_factory = staticmethod(lambda clock: MyShim(clock))

MRTR clients (protocol 2026-07-28) have their own machine,
:func:`mrtr_conformance_machine`, and so do clients of the tasks extension,
:func:`tasks_conformance_machine`. See ``docs/testing.md``. Requires ``hypothesis`` (a
test dependency, not a runtime one): install the ``testing`` extra; without it the import
fails with a ``ModuleNotFoundError`` that says so.
"""

from fsm._extras import missing_extra

try:
    from fsm.testing.kit import (
        FAST,
        OUTCOMES,
        PROFILES,
        THOROUGH,
        ClientFactory,
        ClientUnderTest,
        ConformanceFailure,
        ConformanceMachine,
        ConformanceTests,
        conformance_machine,
        kit_settings,
        use_profile,
    )
    from fsm.testing.mrtr_kit import (
        MrtrClientFactory,
        MrtrClientUnderTest,
        MrtrConformanceMachine,
        mrtr_conformance_machine,
    )
    from fsm.testing.reference import NoDedupGuard, Sdk230Client, guard_factory
    from fsm.testing.tasks_kit import (
        TasksClientFactory,
        TasksClientUnderTest,
        TasksConformanceMachine,
        tasks_conformance_machine,
    )
except ModuleNotFoundError as exc:  # hypothesis, the testing extra
    raise missing_extra("testing", "fsm.testing", exc) from exc

__all__ = [
    "FAST",
    "OUTCOMES",
    "PROFILES",
    "THOROUGH",
    "ClientFactory",
    "ClientUnderTest",
    "ConformanceFailure",
    "ConformanceMachine",
    "ConformanceTests",
    "MrtrClientFactory",
    "MrtrClientUnderTest",
    "MrtrConformanceMachine",
    "NoDedupGuard",
    "Sdk230Client",
    "TasksClientFactory",
    "TasksClientUnderTest",
    "TasksConformanceMachine",
    "conformance_machine",
    "guard_factory",
    "kit_settings",
    "mrtr_conformance_machine",
    "tasks_conformance_machine",
    "use_profile",
]
