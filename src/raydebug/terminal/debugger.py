"""The terminal debugger's commands: pdb's behaviour, carried out with DAP requests.

One :class:`TerminalDebugger` serves one attached session. :meth:`execute` runs one input
line and says whether the session goes on; it never raises for the debuggee's errors (they
are printed as pdb prints them, ``*** NameError: ...``). The commands live by idea:
:mod:`.inspect_commands` (stack, source, values), :mod:`.breakpoint_commands`,
:mod:`.running` (the commands that let the debuggee run, and the wait) and
:mod:`.session_commands` (threads, leaving, help), all on one :class:`~.context.DebuggerContext`.
"""

from __future__ import annotations

from ..errors import CommandError, DapRequestError, RaydebugError
from . import commands, render, snapshot_rules
from .breakpoint_commands import BreakpointCommands
from .commands import STATEMENT, Command
from .inspect_commands import InspectCommands
from .running import Outcome, RunningCommands
from .session_commands import SessionCommands

__all__ = ["Outcome", "TerminalDebugger"]


class TerminalDebugger(SessionCommands, InspectCommands, BreakpointCommands, RunningCommands):
    """pdb's commands on one attached session; created with the fields of
    :class:`~.context.DebuggerContext` (the debuggee, the session, how to print...)."""

    def execute(self, line: str) -> Outcome:
        """Run one input line (an empty line repeats the previous command, as in pdb)."""
        command = commands.parse(line)
        if command is None:
            command = self._last_command
            if command is None:
                return Outcome.STOPPED
        self._last_command = command if command.name not in (STATEMENT, "help") else None
        try:
            self.show_return_from_c()
            return self._dispatch(command)
        except CommandError as error:
            self.write(render.error(str(error)))
        except DapRequestError as error:
            self.write(render.evaluate_error(str(error)))
        except KeyboardInterrupt:  # during a slow request: the prompt comes back
            self.write("\n--KeyboardInterrupt--")
        except TimeoutError:
            self.write(render.error("the debuggee did not answer in time"))
        except RaydebugError as error:  # the connection broke: said once, below
            if self.remote.stops.ended is None:
                self.write(render.error(str(error)))
        if self.remote.stops.ended is not None:
            self.write(f"session {self.session.get('id')}: {self.remote.stops.ended}")
            return Outcome.ENDED
        return Outcome.STOPPED

    def _dispatch(self, command: Command) -> Outcome:
        if snapshot_rules.is_snapshot(self.session):
            refused = snapshot_rules.refusal(command.name, self.session)
            if refused is not None:
                raise CommandError(refused)
            if command.name == "continue":  # nothing runs on: c ends the view, as q does
                return self.do_quit("")
        handler = getattr(self, f"do_{command.name}" if command.name != STATEMENT
                          else "do_statement")
        result = handler(command.arg)
        return result if isinstance(result, Outcome) else Outcome.STOPPED
