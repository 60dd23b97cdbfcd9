"""The control messages the hub sends an agent, each to its handler, through one table.

A new message is a handler and one line in :meth:`ControlDispatch.__init__`'s table. Error
policy (:meth:`ControlDispatch.handle`): the hub's errors (an unexpected message, a
malformed one) and the connection's propagate, and the link drops the control connection;
a bug of ours is said on stderr and contained, so the link and the process go on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import RaydebugError, RemoteProtocolError
from ...protocol.control import (
    ArmBreakpoints,
    CancelPause,
    ClientGone,
    ClientReady,
    CollectStacks,
    ControlMessage,
    HubClosing,
    OpenDataConnection,
    Pause,
    Paused,
    Refused,
    Resume,
)
from ..report import say

if TYPE_CHECKING:
    from .data_connection import DataConnections
    from .owner import LinkOwner


class ControlDispatch:
    """Hands each control message from the hub to its handler, on the link thread.

    ``answer(message)`` sends a message to the hub now; ``on_refused`` and
    ``on_hub_closing`` are the link's own handlers of those messages.
    """

    def __init__(self, owner: LinkOwner, data: DataConnections,
                 answer: Callable[[ControlMessage], None],
                 on_refused: Callable[[Refused], None],
                 on_hub_closing: Callable[[HubClosing], None]) -> None:
        self._answer = answer
        self._table: dict[type[ControlMessage], Callable[[Any], None]] = {
            OpenDataConnection: lambda m: data.open(m.channel),
            ClientReady: data.on_client_ready,
            ClientGone: data.on_client_gone,
            Refused: on_refused,
            CollectStacks: lambda m: answer(owner.collect_stacks(m)),
            Pause: lambda m: answer(owner.pause(m)),
            CancelPause: lambda m: answer(owner.cancel_pause(m)),
            Resume: lambda m: answer(owner.resume(m)),
            HubClosing: on_hub_closing,
            ArmBreakpoints: lambda m: owner.arm_breakpoints(m.breakpoints),
        }

    def handle_read(self, messages: list[ControlMessage], is_open: Callable[[], bool]) -> None:
        """Messages read together, in order, while ``is_open()`` (a handler may drop the
        connection). A ``Pause`` followed among them by a ``CancelPause`` is not carried
        out, only answered: the hub withdrew it before this process could read it (its
        link thread did not run meanwhile), and its asker was told it failed."""
        for index, message in enumerate(messages):
            if not is_open():
                return
            if isinstance(message, Pause) and any(
                    isinstance(later, CancelPause) for later in messages[index + 1:]):
                self._answer(Paused(request_id=message.request_id,
                                    error="withdrawn before this process read it"))
                continue
            self.handle(message)

    def handle(self, message: ControlMessage) -> None:
        """One message from the hub, to its handler. Raises :class:`RaydebugError` (the
        hub's fault) and ``OSError`` (the connection's); a bug of ours is said, and the link
        (and the process) go on."""
        handle = self._table.get(type(message))
        if handle is None:
            raise RemoteProtocolError(f"unexpected {message.TYPE!r} from the hub")
        try:
            handle(message)
        except (RaydebugError, OSError):
            raise
        except Exception as error:
            say(f"internal error answering the hub's {message.TYPE} "
                f"({type(error).__name__}: {error})")
