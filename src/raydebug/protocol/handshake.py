"""The link's handshake, both ways, as two sans-IO objects: the agent's side and the hub's.

Theory of operation. Each side proves to the other that it knows the token, without sending
it, and no proof is good for anything but the connection it was made for::

    hub   -> agent   Challenge(nonce=H, version)
    agent -> hub     Hello(role, channel, nonce=A, mac=MAC("agent", role, channel, H, A))
    hub   -> agent   Welcome(proof=MAC("hub", role, channel, H, A))   or  Refused(reason)

MAC is HMAC-SHA256 keyed with the token, over the protocol version, the direction, the
connection's role and channel, and both nonces. Each nonce is fresh randomness of one side,
so a proof recorded on one connection fails on the next (*replay*); the direction is inside,
so an impostor cannot hand the agent's own proof back as the hub's (*reflection*); the role
and channel are inside, so a proof for a data connection cannot open a control connection.
The hub proves itself only to an agent that proved itself first, and only over a nonce of
its own choosing, so it is no oracle for someone without the token.

Versions: the agent checks the challenge's version before it answers, the hub checks the
hello's before it checks the MAC, so an old and a new side refuse each other at once with a
message naming both versions (the ``version`` fields keep their place on the wire for that).

What this does not do: without TLS, a man in the middle who relays the whole handshake to the
real hub can read and alter what follows it. ``raydebug hub --tls`` (a certificate the agents
pin) closes that; the mutual proof runs inside TLS as well.

Both objects use the verbs of :class:`~raydebug.protocol.connection.DapConnection`:
``receive_data(bytes)`` (``b""`` is EOF), ``next_event()`` (the peer's next message, already
checked, or :data:`NEED_DATA`) and ``send()`` (the bytes of this side's next turn)::

    agent:  next_event() -> Challenge   send() -> Hello   next_event() -> Welcome (hub proven)
    hub:    send() -> Challenge   next_event() -> Hello (agent proven)   send() -> Welcome

A verb used out of turn raises :class:`LocalProtocolError`. A peer breaking the rules makes
``next_event`` raise (:class:`RemoteProtocolError`, :class:`ProtocolVersionError`,
:class:`AuthenticationError` or, on the agent's side, :class:`HubAuthenticationError`) and
the handshake is over: the hub may still :meth:`HubHandshake.refuse` to tell the agent why.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import re
import secrets

from ..errors import (
    AuthenticationError,
    HubAuthenticationError,
    LocalProtocolError,
    ProtocolVersionError,
    RaydebugError,
    RemoteProtocolError,
)
from .control import (
    PROTOCOL_VERSION,
    ROLE_CONTROL,
    ROLE_DATA,
    Challenge,
    ControlConnection,
    ControlMessage,
    Hello,
    Refused,
    Welcome,
)
from .framing import NeedData

AGENT = "agent"
HUB = "hub"
ROLES = (ROLE_CONTROL, ROLE_DATA)
WRONG_TOKEN = "wrong token: set RAYDEBUG_TOKEN to the token `raydebug hub` printed"
_NONCE = re.compile(r"[0-9a-f]{32}")  # what new_nonce() makes: 16 random bytes, in hex


class HandshakeState(enum.Enum):
    """Whose turn it is. Each side goes through its own states in order, then DONE, or
    FAILED as soon as something went wrong (the connection is then to be closed)."""

    SEND_CHALLENGE = "send challenge"  # hub
    AWAIT_CHALLENGE = "await challenge"  # agent
    SEND_HELLO = "send hello"  # agent
    AWAIT_HELLO = "await hello"  # hub
    SEND_WELCOME = "send welcome"  # hub
    AWAIT_WELCOME = "await welcome"  # agent
    DONE = "done"
    FAILED = "failed"


def new_nonce() -> str:
    return secrets.token_hex(16)


def prove(token: str, direction: str, role: str, channel: int, hub_nonce: str,
          agent_nonce: str) -> str:
    """The proof that ``direction`` (:data:`AGENT` or :data:`HUB`) knows ``token``, bound
    to one connection: its role, its channel and both sides' nonces."""
    text = (f"raydebug-v{PROTOCOL_VERSION}|{direction}|{role}|{channel}|{hub_nonce}|"
            f"{agent_nonce}")
    return hmac.new(token.encode(), text.encode(), hashlib.sha256).hexdigest()


def _check_nonce(nonce: str, whose: str) -> None:
    if not _NONCE.fullmatch(nonce):
        raise RemoteProtocolError(f"the {whose}'s nonce is not 32 lowercase hex digits")


_SAME_VERSION = "install the same raydebug version for the hub and the processes it debugs"


class _Side:
    """What both sides share: the framer, the state, and the rules about turns."""

    def __init__(self, token: str, state: HandshakeState) -> None:
        self._token = token
        self._stream = ControlConnection()
        self.state = state

    def receive_data(self, data: bytes) -> None:
        """Feed bytes from the peer; ``b""`` when it closed its side."""
        self._stream.receive_data(data)

    def take_buffered(self) -> bytes:
        """Bytes received past the handshake (they belong to what follows it)."""
        self._expect(HandshakeState.DONE, verb="take_buffered")
        return self._stream.take_buffered()

    def _expect(self, *states: HandshakeState, verb: str) -> None:
        if self.state not in states:
            raise LocalProtocolError(f"{verb}() in handshake state {self.state.value!r}")

    def _next_message(self, peer: str) -> ControlMessage | NeedData:
        message = self._stream.next_event()  # raises on a partial message at the end
        if isinstance(message, NeedData) and self._stream.at_eof:
            raise RemoteProtocolError(f"{peer} closed the connection during the handshake")
        return message


class AgentHandshake(_Side):
    """The agent's (client's) side: answers the hub's challenge, then checks its proof.

    ``hub`` names the hub in error messages (``"the hub at HOST:PORT"``).
    """

    def __init__(self, token: str, role: str, *, channel: int = 0, hub: str = "the hub",
                 nonce: str | None = None) -> None:
        if role not in ROLES:
            raise LocalProtocolError(f"unknown link connection role {role!r}")
        super().__init__(token, HandshakeState.AWAIT_CHALLENGE)
        self._role = role
        self._channel = channel
        self._hub = hub
        self._nonce = nonce or new_nonce()
        self._hub_nonce = ""

    def next_event(self) -> Challenge | Welcome | Refused | NeedData:
        """The hub's :class:`Challenge` (then :meth:`send` the hello), its verified
        :class:`Welcome` (the handshake is DONE), or a :class:`Refused` (FAILED).

        Raises :class:`ProtocolVersionError` for a challenge of another version,
        :class:`HubAuthenticationError` for a welcome without a valid proof, and
        :class:`RemoteProtocolError` for anything else out of place (an end of stream
        included).
        """
        self._expect(HandshakeState.AWAIT_CHALLENGE, HandshakeState.AWAIT_WELCOME,
                     verb="next_event")
        try:
            message = self._next_message(self._hub)
            if isinstance(message, NeedData):
                return message
            if isinstance(message, Refused):
                self.state = HandshakeState.FAILED
                return message
            if self.state is HandshakeState.AWAIT_CHALLENGE:
                return self._on_challenge(message)
            return self._on_welcome(message)
        except RaydebugError:
            self.state = HandshakeState.FAILED
            raise

    def send(self) -> bytes:
        """The hello answering the challenge (after next_event returned it)."""
        self._expect(HandshakeState.SEND_HELLO, verb="send")
        mac = prove(self._token, AGENT, self._role, self._channel, self._hub_nonce,
                    self._nonce)
        self.state = HandshakeState.AWAIT_WELCOME
        return self._stream.send(Hello(role=self._role, mac=mac, nonce=self._nonce,
                                       channel=self._channel))

    def _on_challenge(self, message: ControlMessage) -> Challenge:
        if not isinstance(message, Challenge):
            raise RemoteProtocolError(f"{self._hub} is not a raydebug hub agent port (it "
                                      f"opened with {message.TYPE!r}, not a challenge)")
        if message.version != PROTOCOL_VERSION:
            raise ProtocolVersionError(
                f"{self._hub} speaks link protocol {message.version} and this process "
                f"{PROTOCOL_VERSION}: {_SAME_VERSION}", PROTOCOL_VERSION, message.version)
        _check_nonce(message.nonce, "hub")
        self._hub_nonce = message.nonce
        self.state = HandshakeState.SEND_HELLO
        return message

    def _on_welcome(self, message: ControlMessage) -> Welcome:
        if not isinstance(message, Welcome):
            raise RemoteProtocolError(f"unexpected {message.TYPE!r} from {self._hub} during "
                                      "the handshake")
        expected = prove(self._token, HUB, self._role, self._channel, self._hub_nonce,
                         self._nonce)
        if not hmac.compare_digest(expected, message.proof):
            raise HubAuthenticationError(
                f"{self._hub} answered like a hub but did not prove it knows the token: "
                "giving it nothing (is something else listening on the hub's address?)",
                self._hub)
        self.state = HandshakeState.DONE
        return message


class HubHandshake(_Side):
    """The hub's (server's) side: challenges, checks the agent's proof, proves itself."""

    def __init__(self, token: str, *, nonce: str | None = None) -> None:
        super().__init__(token, HandshakeState.SEND_CHALLENGE)
        self._nonce = nonce or new_nonce()
        self.hello: Hello | None = None  # the agent's, once proven

    def send(self) -> bytes:
        """The challenge (first), or the welcome with the hub's proof (after a proven
        hello)."""
        self._expect(HandshakeState.SEND_CHALLENGE, HandshakeState.SEND_WELCOME, verb="send")
        if self.state is HandshakeState.SEND_CHALLENGE:
            self.state = HandshakeState.AWAIT_HELLO
            return self._stream.send(Challenge(nonce=self._nonce))
        assert self.hello is not None
        proof = prove(self._token, HUB, self.hello.role, self.hello.channel, self._nonce,
                      self.hello.nonce)
        self.state = HandshakeState.DONE
        return self._stream.send(Welcome(proof=proof))

    def next_event(self) -> Hello | NeedData:
        """The agent's :class:`Hello`, its proof checked (then :meth:`send` the welcome).

        Raises :class:`ProtocolVersionError` for a hello of another version,
        :class:`AuthenticationError` for a wrong proof (:data:`WRONG_TOKEN`), and
        :class:`RemoteProtocolError` for anything else out of place (an end of stream
        included).
        """
        self._expect(HandshakeState.AWAIT_HELLO, verb="next_event")
        try:
            message = self._next_message("the agent")
            if isinstance(message, NeedData):
                return message
            return self._on_hello(message)
        except RaydebugError:
            self.state = HandshakeState.FAILED
            raise

    def refuse(self, reason: str) -> bytes:
        """A :class:`Refused` telling the agent why it is not welcome; the handshake is
        FAILED (close after writing it). Not after the welcome."""
        if self.state is HandshakeState.DONE:
            raise LocalProtocolError("refuse() after the welcome")
        self.state = HandshakeState.FAILED
        return self._stream.send(Refused(reason=reason))

    def _on_hello(self, message: ControlMessage) -> Hello:
        if not isinstance(message, Hello):
            raise RemoteProtocolError(f"expected a hello message, got {message.TYPE!r}")
        if message.version != PROTOCOL_VERSION:
            raise ProtocolVersionError(
                f"this hub speaks link protocol {PROTOCOL_VERSION} and the agent "
                f"{message.version}: {_SAME_VERSION}", PROTOCOL_VERSION, message.version)
        if message.role not in ROLES:
            raise RemoteProtocolError(f"unknown link connection role {message.role!r}")
        _check_nonce(message.nonce, "agent")
        expected = prove(self._token, AGENT, message.role, message.channel, self._nonce,
                         message.nonce)
        if not hmac.compare_digest(expected, message.mac):
            raise AuthenticationError(WRONG_TOKEN)
        self.hello = message
        self.state = HandshakeState.SEND_WELCOME
        return message
