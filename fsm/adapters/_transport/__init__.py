"""The guarded transport's parts, one job per module, with named APIs that the SDK
adapters and the gateway import (nothing here is public API: the adapters and
:mod:`fsm.gateway` are).

* :mod:`~fsm.adapters._transport.sse`: the product's one SSE parser, and the encoding
  of the events the transport writes.
"""
