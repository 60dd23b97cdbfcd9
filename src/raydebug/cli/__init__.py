"""The ``raydebug`` command. Each command parses its options, calls the code that does the
work, and hands plain data to :mod:`raydebug.views` to render.

Commands by module: ``hub_command`` (hub, hub-address), ``run_command`` (run),
``sessions`` (list, attach, vscode), ``live_commands`` (ps, stacks, pause), ``breakpoints``
(break, logs), ``web_command`` (web), ``tunnel_command`` (tunnel). Shared: ``locate``
(which hub), ``options`` (common options), ``output`` (errors and colour).

A :class:`~raydebug.errors.RaydebugError` becomes one red line on stderr and exit status 1.
"""

from __future__ import annotations

import sys

import click

from ..errors import RaydebugError
from .breakpoints import break_command, logs_command
from .hub_command import hub
from .live_commands import pause, ps, stacks
from .output import error
from .run_command import run
from .sessions import attach, list_command, vscode
from .tunnel_command import hub_address, tunnel
from .web_command import web

CONTEXT = {"help_option_names": ["-h", "--help"]}


@click.group(context_settings=CONTEXT,
             epilog="Shell completion (commands, options, session ids): add "
                    "eval \"$(_RAYDEBUG_COMPLETE=bash_source raydebug)\" to ~/.bashrc "
                    "(zsh_source in ~/.zshrc; fish_source for fish).")
@click.version_option(package_name="raydebug")
def cli() -> None:
    """One port to every paused Python process of a cluster."""


@cli.command("help")
@click.argument("command", required=False)
@click.pass_context
def help_command(ctx: click.Context, command: str | None) -> None:
    """Show the help of raydebug, or of COMMAND."""
    assert ctx.parent is not None
    if command is None:
        click.echo(cli.get_help(ctx.parent))
        return
    chosen = cli.get_command(ctx.parent, command)
    if chosen is None:
        raise click.UsageError(f"no such command {command!r}; `raydebug help` lists them",
                               ctx.parent)
    with click.Context(chosen, info_name=command, parent=ctx.parent) as command_ctx:
        click.echo(chosen.get_help(command_ctx))


for _command in (hub, run, list_command, vscode, attach, ps, stacks, pause, hub_address,
                 tunnel, web, break_command, logs_command):
    cli.add_command(_command)


def main() -> None:
    try:
        cli(standalone_mode=False, prog_name="raydebug")
    except click.exceptions.Abort:
        sys.exit(130)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.ClickException as failure:
        failure.show()
        sys.exit(failure.exit_code)
    except RaydebugError as failure:
        error(str(failure))
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
