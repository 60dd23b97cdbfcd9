"""Help epilogs whose examples fit the terminal: ``raydebug COMMAND --help``.

An epilog's examples are a ``\\b`` block (click keeps it as written): a command, two or more
spaces, what it does. Kept as written, a narrow terminal wrapped each line mid-word
("every thread of ever" / "y process, merged" at 60 columns). :func:`fit_examples` moves a
description that does not fit under its command, indented, wrapped at word boundaries.
"""

from __future__ import annotations

import inspect
import re
import textwrap

import click

# "  raydebug ps rank=0-3       ranks 0 to 3": the command, then its description.
_EXAMPLE = re.compile(r"^(?P<command>\s*\S.*?)(?P<gap>\s{2,})(?P<what>\S.*)$")
_UNDER = 6  # a moved description's indent: under the command's first word, two further in


def fit_examples(epilog: str, width: int) -> str:
    """``epilog`` with every line of its ``\\b`` blocks at most ``width`` characters where
    words allow: in a block with a line too long, each example keeps its command on its line
    and takes its description to the lines below, wrapped (all of the block's, so that they
    read alike). Text outside ``\\b`` blocks is left to click's own wrapping."""
    return "\n\n".join(_fit_block(block, width) for block in epilog.split("\n\n"))


def _fit_block(block: str, width: int) -> str:
    lines = block.split("\n")
    if lines[0] != "\b" or all(len(line) <= width for line in lines):
        return block
    out = lines[:1]
    for line in lines[1:]:
        match = _EXAMPLE.match(line)
        if not line.startswith(" "):  # a heading ("Examples:")
            out.append(line)
            continue
        if match:
            command, what = match["command"], match["what"]
        elif len(line) - len(line.lstrip()) > _UNDER:  # a description on a line of its own
            command, what = "", line.strip()
        else:  # an example without one
            command, what = line, ""
        if command:
            out.append(command)
        out.extend(textwrap.wrap(what, max(width - _UNDER, 20), initial_indent=" " * _UNDER,
                                 subsequent_indent=" " * _UNDER, break_on_hyphens=False))
    return "\n".join(out)


class FittedExamplesCommand(click.Command):
    """A command whose epilog's examples fit the help's width (:func:`fit_examples`)."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if self.epilog:
            formatter.write_paragraph()
            with formatter.indentation():
                formatter.write_text(fit_examples(
                    inspect.cleandoc(self.epilog), formatter.width - formatter.current_indent))
