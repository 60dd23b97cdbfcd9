"""pdb's command language, parsed: pure functions from a typed line to what it asks for.

Names and abbreviations are pdb's (``c``, ``cont`` and ``continue`` are one command: any
prefix of the full name at least as long as its shortest form). A line whose first word is no
command is a Python statement, as in pdb; ``!`` forces that reading.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

from ..errors import CommandError


@dataclass(frozen=True)
class Spec:
    name: str
    shortest: str  # the shortest accepted abbreviation
    usage: str
    help: str
    aliases: tuple[str, ...] = ()


SPECS = [
    Spec("where", "w", "w(here)", "Print the stack, most recent frame last; > marks the "
         "current frame.", ("bt",)),
    Spec("up", "u", "u(p) [count]", "Move the current frame count (default 1) levels up "
         "(to older frames)."),
    Spec("down", "d", "d(own) [count]", "Move the current frame count (default 1) levels "
         "down (to newer frames)."),
    Spec("frame", "f", "f(rame) N", "Select frame N, counting from 0 at the oldest (the first "
         "that where lists)."),
    Spec("list", "l", "l(ist) [first[, last] | .]", "List 11 lines around the current line, "
         "or continue the previous listing; '.' lists around the current line again."),
    Spec("longlist", "longlist", "ll | longlist", "List the whole source of the current "
         "function.", ("ll",)),
    Spec("p", "p", "p expression", "Print the value of the expression."),
    Spec("pp", "pp", "pp expression", "Pretty-print the value of the expression."),
    Spec("next", "n", "n(ext)", "Run to the next line of the current function."),
    Spec("step", "s", "s(tep)", "Run to the next line, stepping into calls."),
    Spec("return", "r", "r(eturn)", "Run until the current function returns (stops in the "
         "caller)."),
    Spec("until", "unt", "unt(il) [lineno]", "Run until a line greater than the current one "
         "is reached (or lineno), or the current frame returns."),
    Spec("continue", "c", "c(ont(inue))", "Continue until the next breakpoint of this process "
         "(a breakpoint() call too). When the function it paused in returns, the session "
         "ends (with --follow, on to the next breakpoint). With attach --group: every "
         "stopped thread of the group runs on, until the next stop of any."),
    Spec("c1", "c1", "c1", "Continue only the current thread; the other stopped threads "
         "stay stopped (with attach --group: every other process too, and the prompt moves "
         "to the next stopped thread, if any)."),
    Spec("break", "b", "b(reak) [file:line | line | function] [, condition]",
         "Set a breakpoint; with no argument, list breakpoints."),
    Spec("tbreak", "tbreak", "tbreak [file:line | line | function] [, condition]",
         "Set a temporary breakpoint, removed when first hit."),
    Spec("clear", "cl", "cl(ear) [bpnumber ... | file:line]", "Delete breakpoints; with no "
         "argument, all of them."),
    Spec("disable", "disable", "disable bpnumber ...", "Disable breakpoints."),
    Spec("enable", "enable", "enable bpnumber ...", "Enable breakpoints."),
    Spec("locals", "locals", "locals", "Print the current frame's local variables."),
    Spec("args", "a", "a(rgs)", "Print the current function's arguments."),
    Spec("display", "display", "display [expression]", "Show the expression's value each "
         "time it changes at a stop; with no argument, list displays."),
    Spec("undisplay", "undisplay", "undisplay [expression]", "Stop displaying the "
         "expression; with no argument, all of them."),
    Spec("threads", "threads", "threads", "List the process's threads; * marks the current."),
    Spec("thread", "thread", "thread N", "Switch to thread N (an id from threads)."),
    Spec("exceptions", "exc", "exc(eptions)", "Show the exception this session stopped on."),
    Spec("help", "h", "h(elp) [command]", "List commands, or show one command's help."),
    Spec("quit", "q", "q(uit)", "Detach: the process continues. Ctrl-D does the same.",
         ("exit",)),
    Spec("kill", "kill", "kill", "Terminate the debugged process (asks first)."),
]

STATEMENT = "!"  # the name of a Python statement or expression line
_BY_ALIAS = {alias: spec.name for spec in SPECS for alias in spec.aliases}


@dataclass(frozen=True)
class Command:
    name: str  # a Spec name, or STATEMENT
    arg: str = ""


def resolve(word: str) -> str | None:
    """The command a first word names (``cont`` -> ``continue``), or None."""
    if word in _BY_ALIAS:
        return _BY_ALIAS[word]
    for spec in SPECS:
        if word == spec.name or (word.startswith(spec.shortest) and spec.name.startswith(word)):
            return spec.name
    return None


def parse(line: str) -> Command | None:
    """The command of one input line; None for an empty line (pdb repeats the last one)."""
    text = line.strip()
    if not text:
        return None
    if text.startswith("!"):
        return Command(STATEMENT, text[1:].strip())
    word, _, rest = text.partition(" ")
    name = resolve(word)
    if name is None or _is_assignment(rest):
        return Command(STATEMENT, text)  # `n = 3` assigns to n, as in pdb
    return Command(name, rest.strip())


def _is_assignment(rest: str) -> bool:
    return bool(re.match(r"=(?!=)", rest.strip()))


@dataclass(frozen=True)
class Location:
    """Where ``break`` puts a breakpoint: a line (in ``file`` or the current file) or a
    function name; ``condition`` is a Python expression, or None."""

    file: str | None = None
    line: int | None = None
    function: str | None = None
    condition: str | None = None


def parse_location(arg: str) -> Location:
    """``file:line``, ``line`` or ``function``, optionally followed by ``, condition``."""
    where, comma, condition = arg.partition(",")
    where = where.strip()
    cond = condition.strip() or None
    if comma and cond is None:
        raise CommandError("missing condition after ','")
    if not where:
        raise CommandError("give a line, file:line or function")
    if where.isdigit():
        return Location(line=int(where), condition=cond)
    file, colon, number = where.rpartition(":")
    if colon:
        if not number.strip().isdigit() or not file:
            raise CommandError(f"bad location {where!r}: expected file:line")
        return Location(file=file.strip(), line=int(number), condition=cond)
    if not re.fullmatch(r"[A-Za-z_][\w.]*", where):
        raise CommandError(f"bad location {where!r}: expected file:line, line or function")
    return Location(function=where, condition=cond)


def parse_count(arg: str, default: int = 1) -> int:
    if not arg:
        return default
    try:
        return int(arg)
    except ValueError:
        raise CommandError(f"expected a number, got {arg!r}") from None


def parse_numbers(arg: str) -> list[int]:
    try:
        return [int(word) for word in arg.split()]
    except ValueError:
        raise CommandError(f"expected breakpoint numbers, got {arg!r}") from None


def help_text(topic: str = "", width: int = 80) -> str:
    """pdb-style help: every command's usage, or one command's help, in ``width`` columns."""
    if topic:
        name = resolve(topic)
        spec = next((s for s in SPECS if s.name == name), None)
        if spec is None:
            raise CommandError(f"no help on {topic!r}")
        return "\n".join([spec.usage, *textwrap.wrap(spec.help, max(width, 30),
                                                      initial_indent="    ",
                                                      subsequent_indent="    ")])
    lines = textwrap.wrap("Commands (pdb's names; any Python statement works too, or "
                          "!statement):", max(width, 30))
    column = 24 if width >= 60 else 0  # narrow: the summary goes under the usage
    for spec in SPECS:
        usage = spec.usage if column and len(spec.usage) <= column else None
        if usage is None:
            lines.extend(textwrap.wrap(spec.usage, max(width - 2, 20), initial_indent="  ",
                                       subsequent_indent="    "))
        summary = textwrap.wrap(spec.help.split(". ")[0].rstrip("."),
                                max(width - column - 3 - (0 if column else 2), 20))
        for number, text in enumerate(summary):
            indent = "  " if column else "    "
            lines.append(f"{indent}{usage if usage and number == 0 else '':<{column}} {text}"
                         if column else f"{indent}{text}")
    lines.extend(textwrap.wrap("Ctrl-C pauses a running process; a second Ctrl-C, q or "
                               "Ctrl-D detaches.", max(width, 30)))
    return "\n".join(lines)


def command_names() -> list[str]:
    return sorted({spec.name for spec in SPECS} | set(_BY_ALIAS))
