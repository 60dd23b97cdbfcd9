"""A pause request's lifecycle: every request ends, and a finished one cannot change."""

from __future__ import annotations

import pytest

from raydebug.errors import LocalProtocolError
from raydebug.session import PauseRequestEvent as Event
from raydebug.session import PauseRequestState as State
from raydebug.session import next_pause_request_state


@pytest.mark.parametrize(("state", "event", "after"), [
    (State.ASKED, Event.THREAD_STOPPED, State.STOPPED),
    (State.ASKED, Event.REPORTED_BLOCKED, State.BLOCKED),
    (State.BLOCKED, Event.THREAD_STOPPED, State.STOPPED),
    (State.ASKED, Event.CANCELLED, State.CANCELLED),
    (State.BLOCKED, Event.CANCELLED, State.CANCELLED),
    (State.ASKED, Event.EXPIRED, State.EXPIRED),
])
def test_a_request_ends_as_its_thread_or_its_asker_says(state, event, after):
    assert next_pause_request_state(state, event) is after


@pytest.mark.parametrize("final", [State.STOPPED, State.CANCELLED, State.EXPIRED])
@pytest.mark.parametrize("event", list(Event))
def test_an_ended_request_never_changes(final, event):
    with pytest.raises(LocalProtocolError, match=f"a pause request {final.value} cannot"):
        next_pause_request_state(final, event)


def test_a_blocked_thread_is_listed_so_its_request_no_longer_expires():
    with pytest.raises(LocalProtocolError, match="blocked cannot be expired"):
        next_pause_request_state(State.BLOCKED, Event.EXPIRED)
