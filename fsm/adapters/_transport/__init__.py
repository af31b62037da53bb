"""The guarded transport both SDK adapters and the gateway are built on, one job per
module, each with a named API (nothing here is public: :mod:`fsm.adapters.core`,
:mod:`fsm.adapters.mcp2`, :mod:`fsm.adapters.mcp1` and :mod:`fsm.gateway` are). How it
works, and what it cannot see: ``docs/adapter.md``.

Modules, each importing only those above it:

* :mod:`~fsm.adapters._transport.sse`: the product's one SSE parser; the events the
  transport writes; the plain-notification fast path.
* :mod:`~fsm.adapters._transport.http`: reading a response (and what it proves of the
  session's credentials), local responses, the error that ends a failed interaction,
  stream names.
* :mod:`~fsm.adapters._transport.handles`: a stream's tee, the call in flight.
* :mod:`~fsm.adapters._transport.body`: the body the SDK reads for a tracked stream.
* :mod:`~fsm.adapters._transport.transport`: the HTTP transport and :func:`bind`.
* :mod:`~fsm.adapters._transport.session_io`: one session's guard and the IO it asks for.
* :mod:`~fsm.adapters._transport.session`: the guarded session and connection, and the
  binding of an SDK line.
"""
