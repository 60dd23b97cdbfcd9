"""What the hub is told to do by a group session's policy (:mod:`.group_policy`): its
decisions as data, which the hub carries out in order (``hub/clients/group_session.py``) and
a test reads in memory (``tests/unit/group_pair.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from .messages import Message, Request


@dataclass(frozen=True)
class ToClient:
    """Send ``message`` to the client, numbered by the hub's connection to it."""

    message: Message


@dataclass(frozen=True)
class ToProcess:
    """Send ``message`` to the debugger of process ``key`` as it is: numbered already."""

    key: str
    message: Message


@dataclass(frozen=True)
class PauseProcess:
    """Tell process ``key``'s agent to pause every thread (``Pause``, ``by_client``), for at
    most ``expire_ms``, as a one-process session's client pause does."""

    key: str
    expire_ms: int


@dataclass(frozen=True)
class ProcessReady:
    """Process ``key``'s debugger has its configuration: tell its agent (``ClientReady``),
    which releases the paused threads or replays their stops."""

    key: str


@dataclass(frozen=True)
class HubAnswers:
    """A request of the group session itself: the hub answers it, once."""

    request: Request


@dataclass(frozen=True)
class PauseRunning:
    """Pause running process ``key`` as ``raydebug pause`` does (its live link's ``Pause``):
    it has no debugger connection yet; once a thread stops it joins the group."""

    key: str


@dataclass(frozen=True)
class AskThreads:
    """Ask the agents of running processes ``keys`` for their threads (their stacks); each
    answer (or its absence, None) goes to :meth:`.GroupPolicy.running_threads`."""

    keys: tuple[str, ...]


Action = (ToClient | ToProcess | PauseProcess | ProcessReady | HubAnswers | PauseRunning
          | AskThreads)
