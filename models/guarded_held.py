"""The library's policy against a server that still holds the connection a cut left half-open.

After an abrupt cut the server may never have seen its client go: it keeps the old
connection and refuses every resume while it does. The TypeScript SDK with an event store
answers 409 "Conflict: Stream already has an active connection" until a write to the old
connection fails; IBM ContextForge answers 409 with ``Retry-After`` while its listener
claim lasts (30 s); Render's hosted server answers 400 "session already exists" for about
two minutes. Here the network cuts the tool call's stream once, and after an abrupt cut
the server refuses up to ``hold`` resumes (the world's ``hold``; it may let go after any
fewer), so every ``k`` from 0 to ``hold`` is explored in one model; a world with ``hold``
checks the invariant ``patience`` besides P1-P7 and L1: a refusal of a server still
holding the old connection never ends the interaction.

The guard here is the shipped one with its default patience (``resume_patience_s``,
150 s) and the smallest jitter draw: the shortest waits, so the most refusals its patience
allows (:func:`tolerated`), the worst case for termination.

* ``guarded-held[409,k=14]``, ``guarded-held[400-exists,k=14]``,
  ``guarded-held[409-retry-after,k=5]``: the server holds for up to as many refusals as
  the patience allows (14 of backoff from 0.5 s to 15 s; 5 of ``Retry-After: 30``).
  P1-P7, L1 and ``patience`` hold.
* ``guarded-held[409,k=15]``: one refusal more than that. The guard gives up (it must
  fail ``patience``): the horizon is real. It still terminates.
* ``guarded-held[409,forever]``: the server never lets go. The guard gives up once its
  patience is spent, by the waits it asked for (the model's clock hardly moves): P1-P7
  and L1 hold (``patience`` is not a property of a server that cannot be waited out).
* ``impatient[409,k=3]``: the guard as it was, a refusal counted as a resume without
  progress (budget 3): it must fail ``patience``, ending the call failed at the third
  refusal, where the guard waits and completes with the result.
* ``impatient[400-exists,k=1]``: the same guard against Render's refusal, which its
  table judged terminal: it fails ``patience`` at the first refusal.
* ``endless-patience[409,forever]``: a guard that waits every refusal out and counts
  nothing (no horizon, no cap on resumes): it must fail L1, a lasso of refusals.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fsm import Guard, GuardConfig
from fsm.outcomes import RESUME_RULES, Classifier
from fsm.worlds.sse import Bounds, HeldAnswer, World

from .guarded import CONFIG, GuardPolicy

LEGEND = (
    "guarded-held[refusal,k=N]: the server refuses resumes with 409, 409 with Retry-"
    'After or Render\'s 400 "session already exists" while it holds the old connection, '
    "for up to N refusals (forever: it never lets go); impatient: the guard as it was; "
    "endless-patience: a client that never gives up"
)
"""What the fields of this file's model names mean (``fsm check --overview`` prints it)."""


def least_jitter() -> float:
    """The smallest draw: each patient wait is half its backoff step."""
    return 0.0


PATIENT_CONFIG = replace(CONFIG, resume_jitter=least_jitter)
"""The shipped policy's knobs (default patience), its jitter drawing the shortest waits."""

IMPATIENT_CONFIG = replace(
    PATIENT_CONFIG,
    max_resumes_without_progress=3,
    resume_classifier=Classifier(
        tuple(
            replace(r, patient=False) for r in RESUME_RULES if not r.patient or r.name == "http-409"
        )
    ),
)
"""The guard as it was: its resume table without the patient rows it did not have, and
its 409 row not patient, so a refusal spends the budget of resumes without progress (3,
the default), and Render's 400 is terminal."""

HELD_RETRY_AFTER = 30.0
"""The ``Retry-After`` of the world's ``409-retry-after`` (``models/guarded.py``)."""


def tolerated(config: GuardConfig, retry_after: float | None = None) -> int:
    """How many refusals in a row ``config``'s patience waits out when the clock stands
    still (each wait as :meth:`GuardConfig.patient_delay` says, the last one cut to the
    horizon): the refusal after them ends the stream."""
    waited, refusals = 0.0, 0
    while waited < config.resume_patience_s:
        step = config.patient_delay(refusals, None, retry_after)
        waited += min(step, config.resume_patience_s - waited)
        refusals += 1
    return refusals


class EndlessPatience(Guard):
    """The guard, patient without end: it waits every refusal out and counts nothing."""

    def _patience(self, st: Any, retry_after: float | None) -> tuple[float | None, Any]:
        return self.config.patient_delay(0, st.retry_ms, retry_after), None


def held(hold: int | None, answer: HeldAnswer = "409") -> Bounds:
    """One abrupt or clean cut; after an abrupt one the server refuses up to ``hold``
    resumes with ``answer`` (``None``: it never lets go)."""
    return Bounds(requests=1, cuts=1, post_faults=1, hold=hold, held_answer=answer)


def _k(hold: int | None) -> str:
    return "forever" if hold is None else f"k={hold}"


def variants() -> list[World[Any]]:
    """The shipped guard's patience and its limits, and the guard as it was."""
    policy = GuardPolicy(PATIENT_CONFIG)  # one memo of guard steps for the sweep
    longest = {
        "409": tolerated(PATIENT_CONFIG),
        "400-exists": tolerated(PATIENT_CONFIG),
        "409-retry-after": tolerated(PATIENT_CONFIG, HELD_RETRY_AFTER),
    }
    answers: tuple[HeldAnswer, ...] = ("409", "400-exists", "409-retry-after")
    worlds: list[World[Any]] = [
        World(policy, held(longest[a], a), name=f"guarded-held[{a},{_k(longest[a])}]")
        for a in answers
    ]
    beyond = longest["409"] + 1
    worlds.append(
        World(policy, held(beyond), name=f"guarded-held[409,{_k(beyond)}]", expect=("patience",))
    )
    worlds.append(World(policy, held(None), name="guarded-held[409,forever]"))
    impatient = GuardPolicy(IMPATIENT_CONFIG, name="impatient")
    worlds.append(World(impatient, held(3), name="impatient[409,k=3]", expect=("patience",)))
    worlds.append(
        World(
            impatient,
            held(1, "400-exists"),
            name="impatient[400-exists,k=1]",
            expect=("patience",),
        )
    )
    endless = GuardPolicy(
        replace(PATIENT_CONFIG, max_resumes_per_stream=None),
        guard=EndlessPatience,
        name="endless-patience",
    )
    worlds.append(World(endless, held(None), name="endless-patience[409,forever]", expect=("L1",)))
    return worlds


MODELS = variants()
