"""RAYDEBUG_HUB_ARGS: `raydebug hub`'s options for a hub raydebug starts on its own."""

from __future__ import annotations

import pytest

from raydebug.errors import ConfigurationError
from raydebug.hub import HubConfig
from raydebug.hub_options import hub_options_wanted


def test_options_become_hub_config_fields():
    options = hub_options_wanted({"RAYDEBUG_HUB_ARGS": "--allow-terminate --max-sessions 500 "
                                                       "--client-token 's e'"})
    assert options == {"allow_terminate": True, "max_sessions": 500, "client_token": "s e"}
    config = HubConfig(**options)
    assert config.allow_terminate and config.max_sessions == 500


def test_nothing_set_is_the_defaults():
    assert hub_options_wanted({}) == {}
    assert hub_options_wanted({"RAYDEBUG_HUB_ARGS": "  "}) == {}


@pytest.mark.parametrize(("text", "said"), [
    ("--port 1", "unrecognized arguments: --port 1"),  # the actor chooses its ports
    ("--max-sessions many", "argument --max-sessions: invalid int value: 'many'"),
    ("--max-sessions", "argument --max-sessions: expected one argument"),
    ("--client-token 'open", "No closing quotation"),
])
def test_a_mistake_is_one_line_naming_the_variable(text: str, said: str):
    with pytest.raises(ConfigurationError) as raised:
        hub_options_wanted({"RAYDEBUG_HUB_ARGS": text})
    message = str(raised.value)
    assert message.startswith("RAYDEBUG_HUB_ARGS: ") and said in message, message
    assert "\n" not in message


def test_the_agents_connection_limit_is_taken_by_its_old_name_too():
    """--max-worker-connections is --max-agent-connections' old name: a job that carries it
    still gets its limit."""
    for name in ("--max-agent-connections", "--max-worker-connections"):
        options = hub_options_wanted({"RAYDEBUG_HUB_ARGS": f"{name} 2000"})
        assert options == {"max_agent_connections": 2000}
        assert HubConfig(**options).max_agent_connections == 2000
