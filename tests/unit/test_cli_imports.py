"""What a quick command imports: `raydebug list --json` is run by scripts, often, and its
start is most of its time (docs/design.md#per-step-costs)."""

from __future__ import annotations

import subprocess
import sys

# Modules `list` needs for no run of it: the table's (rich, raydebug.views), vscode's
# (pathlib, with urllib.parse and ipaddress; the agent's address parsing), a Tab press's,
# http's (one status code).
NOT_FOR_LIST = ("rich", "raydebug.views", "pathlib", "raydebug.agent", "click.shell_completion",
                "asyncio", "http")


def test_the_list_command_imports_neither_the_table_nor_the_other_commands():
    script = ("import sys, click; from raydebug.cli import cli; "
              "cli.get_command(click.Context(cli), 'list'); "
              f"print(sorted(name for name in {NOT_FOR_LIST!r} if name in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "[]", done.stderr
