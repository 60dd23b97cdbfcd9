"""The mutual worker handshake, both sides in memory (protocol/handshake.py)."""

from __future__ import annotations

import json

import pytest

from raydebug.errors import (
    AuthenticationError,
    HubAuthenticationError,
    LocalProtocolError,
    ProtocolVersionError,
    RemoteProtocolError,
)
from raydebug.protocol import NEED_DATA, frame
from raydebug.protocol.control import (
    PROTOCOL_VERSION,
    ROLE_CONTROL,
    ROLE_DATA,
    Challenge,
    ControlConnection,
    Hello,
    Refused,
    Welcome,
    decode_control,
    encode_control,
)
from raydebug.protocol.handshake import (
    AGENT,
    HUB,
    AgentHandshake,
    HandshakeState,
    HubHandshake,
    new_nonce,
    prove,
)

TOKEN = "s3cret-token"


class HandshakePair:
    """An agent and a hub side wired back to back (h11's ConnectionPair)."""

    def __init__(self, agent_token: str = TOKEN, hub_token: str = TOKEN,
                 role: str = ROLE_CONTROL, channel: int = 0) -> None:
        self.agent = AgentHandshake(agent_token, role, channel=channel, hub="the hub at h:1")
        self.hub = HubHandshake(hub_token)
        self.wire: list[bytes] = []  # everything either side sent, in order

    def to_agent(self, data: bytes) -> object:
        self.wire.append(data)
        self.agent.receive_data(data)
        return self.agent.next_event()

    def to_hub(self, data: bytes) -> object:
        self.wire.append(data)
        self.hub.receive_data(data)
        return self.hub.next_event()

    def challenge(self) -> Challenge:
        event = self.to_agent(self.hub.send())
        assert isinstance(event, Challenge)
        return event

    def hello(self) -> Hello:
        self.challenge()
        event = self.to_hub(self.agent.send())
        assert isinstance(event, Hello)
        return event

    def run(self) -> Welcome:
        self.hello()
        event = self.to_agent(self.hub.send())
        assert isinstance(event, Welcome)
        return event


def message(data: bytes) -> object:
    stream = ControlConnection()
    stream.receive_data(data)
    return stream.next_event()


@pytest.mark.parametrize(("role", "channel"), [(ROLE_CONTROL, 0), (ROLE_DATA, 7)])
def test_both_sides_prove_the_token_and_finish(role: str, channel: int):
    pair = HandshakePair(role=role, channel=channel)
    pair.run()
    assert pair.agent.state is pair.hub.state is HandshakeState.DONE
    assert pair.hub.hello is not None and pair.hub.hello.role == role
    assert pair.hub.hello.channel == channel
    assert all(TOKEN.encode() not in data for data in pair.wire)


def test_bytes_one_at_a_time_and_what_follows_the_welcome_is_kept():
    pair = HandshakePair(role=ROLE_DATA, channel=3)
    pair.challenge()
    hello = pair.agent.send()
    for byte in hello[:-1]:
        pair.hub.receive_data(bytes([byte]))
        assert pair.hub.next_event() is NEED_DATA
    pair.hub.receive_data(hello[-1:])
    assert isinstance(pair.hub.next_event(), Hello)
    pair.agent.receive_data(pair.hub.send() + b"Content-Length: 2\r\n\r\n{}")
    assert isinstance(pair.agent.next_event(), Welcome)
    assert pair.agent.take_buffered() == b"Content-Length: 2\r\n\r\n{}"  # pydevd's bytes


def test_a_wrong_token_is_refused_and_the_agent_reads_why():
    pair = HandshakePair(agent_token="not-the-token")
    pair.challenge()
    pair.hub.receive_data(pair.agent.send())
    with pytest.raises(AuthenticationError, match="wrong token"):
        pair.hub.next_event()
    assert pair.hub.state is HandshakeState.FAILED
    refused = pair.to_agent(pair.hub.refuse("wrong token: set RAYDEBUG_TOKEN"))
    assert isinstance(refused, Refused) and "wrong token" in refused.reason
    assert pair.agent.state is HandshakeState.FAILED


def impostor_welcome(pair: HandshakePair, welcome: Welcome) -> None:
    """An impostor (no token) sends a challenge, takes the hello, answers ``welcome``."""
    pair.agent.receive_data(encode_control(Challenge(nonce=new_nonce())))
    assert isinstance(pair.agent.next_event(), Challenge)
    pair.agent.send()
    pair.agent.receive_data(encode_control(welcome))


def test_a_hub_that_does_not_know_the_token_is_not_believed():
    for welcome in (Welcome(), Welcome(proof="0" * 64), Welcome(proof="not even hex")):
        pair = HandshakePair()
        impostor_welcome(pair, welcome)
        with pytest.raises(HubAuthenticationError, match="did not prove it knows the token") \
                as refused:
            pair.agent.next_event()
        assert refused.value.address == "the hub at h:1"
        assert pair.agent.state is HandshakeState.FAILED
        with pytest.raises(LocalProtocolError):
            pair.agent.take_buffered()  # nothing past a failed handshake goes anywhere


def test_the_agents_own_proof_reflected_back_is_refused():
    pair = HandshakePair()
    pair.agent.receive_data(encode_control(Challenge(nonce=new_nonce())))
    pair.agent.next_event()
    hello = message(pair.agent.send())
    assert isinstance(hello, Hello)
    pair.agent.receive_data(encode_control(Welcome(proof=hello.mac)))
    with pytest.raises(HubAuthenticationError):
        pair.agent.next_event()


def test_a_welcome_recorded_on_another_connection_is_refused():
    recorded = HandshakePair()
    challenge = recorded.challenge()
    recorded.to_hub(recorded.agent.send())
    welcome = message(recorded.hub.send())
    assert isinstance(welcome, Welcome)
    # Same hub nonce replayed too: the agent's own nonce is fresh, so the proof is stale.
    replay = HandshakePair()
    replay.agent.receive_data(encode_control(challenge))
    replay.agent.next_event()
    replay.agent.send()
    replay.agent.receive_data(encode_control(welcome))
    with pytest.raises(HubAuthenticationError):
        replay.agent.next_event()


def test_a_hello_recorded_on_another_connection_is_refused():
    recorded = HandshakePair()
    recorded.challenge()
    hello = recorded.agent.send()
    replay = HandshakePair()
    replay.hub.send()
    with pytest.raises(AuthenticationError, match="wrong token"):
        replay.to_hub(hello)


def test_a_proof_is_bound_to_direction_role_and_channel():
    hub_nonce, agent_nonce = new_nonce(), new_nonce()
    proofs = {prove(TOKEN, direction, role, channel, hub_nonce, agent_nonce)
              for direction in (AGENT, HUB) for role in (ROLE_CONTROL, ROLE_DATA)
              for channel in (0, 1)}
    assert len(proofs) == 8
    assert prove(TOKEN, AGENT, ROLE_DATA, 1, hub_nonce, agent_nonce) != prove(
        TOKEN, AGENT, ROLE_DATA, 1, agent_nonce, hub_nonce)  # the nonces do not commute

    # The hub's proof, or a data connection's, presented as a control hello: refused.
    hub = HubHandshake(TOKEN)
    challenge = message(hub.send())
    assert isinstance(challenge, Challenge)
    for mac in (prove(TOKEN, HUB, ROLE_CONTROL, 0, challenge.nonce, agent_nonce),
                prove(TOKEN, AGENT, ROLE_DATA, 0, challenge.nonce, agent_nonce)):
        attempt = HubHandshake(TOKEN, nonce=challenge.nonce)
        attempt.send()
        attempt.receive_data(encode_control(Hello(role=ROLE_CONTROL, mac=mac,
                                                  nonce=agent_nonce)))
        with pytest.raises(AuthenticationError):
            attempt.next_event()


def old_hello() -> bytes:
    """What a version-1 agent answers to any challenge: no nonce, its process inside."""
    return frame(json.dumps({"type": "hello", "role": "control", "mac": "ab" * 32,
                             "version": 1, "process": {"pid": 1}, "channel": 0}).encode())


def test_an_old_agent_is_refused_with_both_versions_named():
    hub = HubHandshake(TOKEN)
    hub.send()
    hub.receive_data(old_hello())
    with pytest.raises(ProtocolVersionError) as mismatch:
        hub.next_event()
    assert (mismatch.value.ours, mismatch.value.theirs) == (PROTOCOL_VERSION, 1)
    assert f"protocol {PROTOCOL_VERSION} and the agent 1" in str(mismatch.value)
    refused = message(hub.refuse(str(mismatch.value)))
    # A version-1 agent decodes a refusal like this one and prints its reason.
    assert isinstance(refused, Refused) and "agent 1" in refused.reason


def test_an_old_hub_is_refused_with_both_versions_named_before_any_answer():
    agent = AgentHandshake(TOKEN, ROLE_CONTROL, hub="the hub at h:1")
    agent.receive_data(frame(b'{"type": "challenge", "nonce": "abc", "version": 1}'))
    with pytest.raises(ProtocolVersionError,
                       match=f"h:1 speaks link protocol 1 and this process "
                             f"{PROTOCOL_VERSION}") as mismatch:
        agent.next_event()
    assert (mismatch.value.ours, mismatch.value.theirs) == (PROTOCOL_VERSION, 1)
    with pytest.raises(LocalProtocolError):
        agent.send()  # nothing is sent to a hub of another version


def test_versions_stay_readable_on_the_wire():
    """The refusal depends on reading the other version's ``version`` field."""
    hello = decode_control(old_hello()[old_hello().index(b"{"):])
    assert isinstance(hello, Hello) and hello.version == 1 and hello.nonce == ""
    challenge = decode_control(b'{"type": "challenge", "nonce": "n", "version": 1}')
    assert isinstance(challenge, Challenge) and challenge.version == 1


def test_verbs_out_of_turn_are_local_errors():
    agent = AgentHandshake(TOKEN, ROLE_CONTROL)
    with pytest.raises(LocalProtocolError, match=r"send\(\) in handshake state"):
        agent.send()  # no challenge yet
    with pytest.raises(LocalProtocolError):
        agent.take_buffered()
    hub = HubHandshake(TOKEN)
    with pytest.raises(LocalProtocolError, match=r"next_event\(\)"):
        hub.next_event()  # the hub speaks first
    agent.receive_data(hub.send())
    with pytest.raises(LocalProtocolError):
        hub.send()  # the challenge twice
    assert isinstance(agent.next_event(), Challenge)
    with pytest.raises(LocalProtocolError):
        agent.next_event()  # its turn to send, not to read
    hub.receive_data(agent.send())
    assert isinstance(hub.next_event(), Hello)
    with pytest.raises(LocalProtocolError):
        hub.next_event()
    agent.receive_data(hub.send())
    assert isinstance(agent.next_event(), Welcome)
    for verb in (agent.next_event, agent.send, hub.next_event, hub.send):
        with pytest.raises(LocalProtocolError):
            verb()
    with pytest.raises(LocalProtocolError, match="after the welcome"):
        hub.refuse("too late")
    with pytest.raises(LocalProtocolError, match="unknown link connection role"):
        AgentHandshake(TOKEN, "admin")


def test_peers_breaking_the_rules_are_remote_errors():
    agent = AgentHandshake(TOKEN, ROLE_CONTROL, hub="the hub at h:1")
    agent.receive_data(encode_control(Welcome()))  # no challenge first
    with pytest.raises(RemoteProtocolError, match="not a raydebug hub agent port"):
        agent.next_event()
    with pytest.raises(LocalProtocolError):
        agent.next_event()  # the failure is final

    agent = AgentHandshake(TOKEN, ROLE_CONTROL)
    agent.receive_data(encode_control(Challenge(nonce="x|y")))
    with pytest.raises(RemoteProtocolError, match="nonce"):
        agent.next_event()

    agent = AgentHandshake(TOKEN, ROLE_CONTROL, hub="the hub at h:1")
    agent.receive_data(b"")
    with pytest.raises(RemoteProtocolError, match="h:1 closed the connection"):
        agent.next_event()

    hub = HubHandshake(TOKEN)
    hub.send()
    hub.receive_data(encode_control(Welcome()))
    with pytest.raises(RemoteProtocolError, match="expected a hello"):
        hub.next_event()

    hub = HubHandshake(TOKEN)
    hub.send()
    hub.receive_data(encode_control(Hello(role="admin", mac="m", nonce=new_nonce())))
    with pytest.raises(RemoteProtocolError, match="role"):
        hub.next_event()

    hub = HubHandshake(TOKEN)
    hub.send()
    hub.receive_data(b"Content-Length: 5\r\n\r\n{")
    hub.receive_data(b"")
    with pytest.raises(RemoteProtocolError):
        hub.next_event()  # the end of the stream inside a message


def test_a_refusal_in_place_of_the_challenge_is_an_event():
    agent = AgentHandshake(TOKEN, ROLE_CONTROL)
    agent.receive_data(encode_control(Refused(reason="too many connections")))
    refused = agent.next_event()
    assert isinstance(refused, Refused) and refused.reason == "too many connections"
    assert agent.state is HandshakeState.FAILED
