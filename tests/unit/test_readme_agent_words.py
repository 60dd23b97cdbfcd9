"""README.md names the hub's port and token for agents as the hub's banner and options do
(``agents HOST:PORT``, ``--agent-port``, ``--token``: "The agents' token"), in the
glossary's words (docs/design.md#glossary): "worker" alone means a Ray worker."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_says_agent_address_port_and_token_not_worker():
    text = " ".join(README.read_text().split())  # a phrase may wrap across lines
    assert re.findall(r"worker (?:address|port|token)", text) == []
