"""Check a model of your own with the checker API and print a shortest counterexample.

A model is a closed system: the world (server, network, user) and the client's policy
together, every move of either one an action. This one is small on purpose: one tool
call whose server asks the user one question; the connection may break once, and the
resume replays the question from the server's buffer; the server's deadline may fire.

Two client policies are checked against the same world. One shows every delivery of the
question (what a client without de-duplication does); the checker finds it showing the
question twice, and showing it after the server gave up on it, each with a shortest
path. The other remembers what it showed; every property holds.

Run: python examples/check_my_model.py   (exit status 0: the checker said what we expect)
"""

from typing import NamedTuple

from fsm.checker import BaseModel, Property, check


class State(NamedTuple):
    """One state of the world and the client. States must be immutable and hashable."""

    server: str = "asking"  # "asking", "dead" (its deadline fired) or "answered"
    conn: str = "up"  # "up" or "down"
    sent: bool = False  # the server has sent the question once (its deadline runs)
    delivered: bool = False  # the current connection has carried the question
    cuts: int = 0  # connections lost so far: this world allows one
    memory: bool = False  # the client's own state: "I showed this question already"
    shown: int = 0  # times the user saw the question
    shown_dead: bool = False  # the user saw it after the server had given up on it
    answered: bool = False  # the user answered


# A policy decides, on each delivery of the question, whether to show it:
# policy(memory) -> (memory after, show?)
def show_every_delivery(memory: bool) -> tuple[bool, bool]:
    return True, True


def show_once(memory: bool) -> tuple[bool, bool]:
    return True, not memory


class OneQuestion(BaseModel[State, str]):
    """The world of one question, with the client policy it is given."""

    def __init__(self, policy):
        self.policy = policy

    @property
    def name(self) -> str:
        return self.policy.__name__.replace("_", "-")

    def init_states(self):
        return [State()]

    def actions(self, s):
        # Every move of the world and of the user, in a fixed order; the names are what a
        # counterexample prints (and what fsm.checker.replay takes).
        if s.conn == "up" and not s.delivered:
            yield "deliver"
        if s.conn == "up" and s.cuts < 1:
            yield "cut"
        if s.conn == "down":
            yield "resume"
        if s.sent and s.server == "asking":
            yield "deadline"
        if s.shown and not s.answered:
            yield "answer"

    def next_state(self, s, action):
        if action == "deliver":
            memory, show = self.policy(s.memory)
            return s._replace(
                sent=True,
                delivered=True,
                memory=memory,
                shown=s.shown + show,
                shown_dead=s.shown_dead or (show and s.server == "dead"),
            )
        if action == "cut":
            return s._replace(conn="down", cuts=s.cuts + 1)
        if action == "resume":  # the server replays its buffer: the question comes again
            return s._replace(conn="up", delivered=False)
        if action == "deadline":
            return s._replace(server="dead")
        if action == "answer":  # a late answer goes nowhere: the server dropped the request
            return s._replace(answered=True, server="answered" if s.server == "asking" else "dead")
        return None

    def properties(self):
        return [
            Property.always("P1", lambda s: not s.shown_dead, "a dead request is never shown"),
            Property.always("P2", lambda s: s.shown <= 1, "the question is shown at most once"),
            Property.sometimes("answerable", lambda s: s.server == "answered"),
            Property.terminates(),  # no behaviour runs forever: no reachable cycle
        ]

    def format_state(self, s):
        return f"server={s.server} conn={s.conn} shown={s.shown}"


naive = check(OneQuestion(show_every_delivery))
print(f"{naive.model}: {naive.states} states")
for result in naive.failures():  # each violated property with its shortest path
    print(result.format_text())
naive.assert_violated("P1")  # raises AssertionError if the checker no longer finds it
naive.assert_violated("P2")

fixed = check(OneQuestion(show_once))
print(f"{fixed.model}: {fixed.states} states")
fixed.assert_properties()  # raises AssertionError listing every property that fails
print(f"  all {len(fixed.results)} properties hold")
