"""A hub a test starts (devtools' ``start_hub``) records itself in a state directory of its
own, which the processes and commands run through it share: a user's or another test's
`raydebug pause` on the machine, which reads the per-user state file when given no
address, never finds a test's hub. Real hub, real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers import TIMEOUT, start_hub
from raydebug import state_file

pytestmark = pytest.mark.integration


def test_a_test_hub_is_found_only_by_what_runs_through_it():
    with start_hub() as hub:
        recorded = state_file.read()  # where a command in the test's environment looks
        assert recorded is None or recorded["client"] != hub.client_address, recorded
        found = subprocess.run([sys.executable, "-m", "raydebug", "vscode"],
                               capture_output=True, text=True, timeout=TIMEOUT,
                               env={k: v for k, v in hub.env().items()
                                    if not k.startswith("RAYDEBUG_")})
        assert found.returncode == 0, found.stderr
        assert json.loads(found.stdout)["connect"]["port"] == hub.client[1], found.stdout
        assert hub.state is not None
    assert not os.path.exists(hub.state)  # removed with the hub
