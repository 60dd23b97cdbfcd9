"""The ``raydebug`` click group: its commands imported lazily (:data:`COMMANDS`), ``help``,
and :func:`main`, which turns a :class:`~raydebug.errors.RaydebugError` into one red line on
stderr and exit status 1, and a command line click refuses into one line and exit status 2."""

from __future__ import annotations

import importlib
import sys

import click

from ..errors import RaydebugError
from .output import error

CONTEXT = {"help_option_names": ["-h", "--help"]}

# Command name -> its module and attribute. A command's module is imported when the command
# runs (or help lists it): `raydebug ps --json` then loads neither rich, nor asyncio, nor
# the hub (see docs/design.md#listing-10k).
COMMANDS = {
    "hub": ("hub_command", "hub"),
    "run": ("run_command", "run"),
    "link": ("link_command", "link"),
    "list": ("sessions", "list_command"),
    "vscode": ("vscode_command", "vscode"),
    "attach": ("sessions", "attach"),
    "snapshots": ("sessions", "snapshots_command"),
    "ps": ("live_commands", "ps"),
    "stacks": ("live_commands", "stacks"),
    "pause": ("live_commands", "pause"),
    "continue": ("live_commands", "continue_command"),
    "hub-address": ("tunnel_command", "hub_address"),
    "tunnel": ("tunnel_command", "tunnel"),
    "web": ("web_command", "web"),
    "break": ("breakpoints", "break_command"),
    "logs": ("breakpoints", "logs_command"),
}


class LazyGroup(click.Group):
    """A group whose commands (:data:`COMMANDS`) are imported when first asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is None and cmd_name in COMMANDS:
            module, attribute = COMMANDS[cmd_name]
            found = getattr(importlib.import_module(f"raydebug.cli.{module}"), attribute)
            assert isinstance(found, click.Command)
            self.add_command(found, cmd_name)
        return found


@click.group(cls=LazyGroup, context_settings=CONTEXT,
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


def usage_line(failure: click.UsageError) -> str:
    """A command line click refuses, in one line (click's own takes four: the usage, a
    hint, a blank line and the error) with the command that shows its usage."""
    command = failure.ctx.command_path if failure.ctx is not None else "raydebug"
    message = " ".join(failure.format_message().split()).removesuffix(".")
    if message[:1].isupper() and message[1:2].islower():  # click's "No such option ..."
        message = message[0].lower() + message[1:]
    return f"{message} (`{command} --help` shows its usage)"


def main() -> None:
    try:
        cli(standalone_mode=False, prog_name="raydebug")
    except click.exceptions.Abort:
        sys.exit(130)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.UsageError as failure:
        error(usage_line(failure))
        sys.exit(failure.exit_code)
    except click.ClickException as failure:
        failure.show()
        sys.exit(failure.exit_code)
    except RaydebugError as failure:
        error(str(failure))
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
