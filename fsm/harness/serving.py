"""Deprecated since 0.1.0, removed in 0.2.0: moved to :mod:`fsm.wire.serving`."""

from fsm._deprecate import moved_module

__getattr__ = moved_module(__name__, "fsm.wire.serving", "0.1.0")
