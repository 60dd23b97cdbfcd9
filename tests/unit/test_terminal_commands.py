"""The terminal debugger's pure parts: pdb's command language, breakpoints, rendering."""

from __future__ import annotations

import textwrap

import pytest

from raydebug.errors import CommandError
from raydebug.terminal import commands, render
from raydebug.terminal.breakpoints import BreakpointTable
from raydebug.terminal.commands import (
    STATEMENT,
    Command,
    Location,
    help_text,
    parse,
    parse_location,
)
from raydebug.terminal.sources import function_arguments, function_span


@pytest.mark.parametrize(("line", "expected"), [
    ("c", Command("continue")),
    ("cont", Command("continue")),
    ("continue", Command("continue")),
    ("n", Command("next")),
    ("s", Command("step")),
    ("r", Command("return")),
    ("unt 12", Command("until", "12")),
    ("bt", Command("where")),
    ("w", Command("where")),
    ("ll", Command("longlist")),
    ("l 10, 20", Command("list", "10, 20")),
    ("b job.py:12, x > 3", Command("break", "job.py:12, x > 3")),
    ("cl 1 2", Command("clear", "1 2")),
    ("p  total ", Command("p", "total")),
    ("q", Command("quit")),
    ("exit", Command("quit")),
    ("!n = 3", Command(STATEMENT, "n = 3")),
    ("n = 3", Command(STATEMENT, "n = 3")),  # pdb: an assignment, not `next`
    ("n == 3", Command("next", "== 3")),
    ("total * 2", Command(STATEMENT, "total * 2")),
    ("print(total)", Command(STATEMENT, "print(total)")),
])
def test_parse_uses_pdbs_names_and_abbreviations(line: str, expected: Command):
    assert parse(line) == expected


def test_an_empty_line_repeats_the_last_command():
    assert parse("   ") is None


@pytest.mark.parametrize(("arg", "expected"), [
    ("12", Location(line=12)),
    ("job.py:12", Location(file="job.py", line=12)),
    ("/srv/job.py:7, x > 3", Location(file="/srv/job.py", line=7, condition="x > 3")),
    ("compute", Location(function="compute")),
    ("pkg.mod.compute, n == 1", Location(function="pkg.mod.compute", condition="n == 1")),
])
def test_break_locations(arg: str, expected: Location):
    assert parse_location(arg) == expected


@pytest.mark.parametrize("arg", ["", "job.py:x", "12,", "not a name"])
def test_bad_break_locations_say_why(arg: str):
    with pytest.raises(CommandError):
        parse_location(arg)


@pytest.mark.parametrize("width", [120, 80, 60, 40])
def test_help_fits_the_terminal_and_covers_every_command(width: int):
    text = help_text(width=width)
    assert all(len(line) <= width for line in text.splitlines()), text
    assert "c(ont(inue))" in text and "q(uit)" in text
    assert all(len(line) <= width for line in help_text("c", width=width).splitlines())


def test_help_covers_one_command():
    assert help_text("c").startswith("c(ont(inue))")
    with pytest.raises(CommandError):
        help_text("frobnicate")


def test_breakpoint_table_builds_dap_requests_per_file():
    table = BreakpointTable()
    first = table.add("/a.py", 3)
    table.add("/a.py", 9, condition="x > 1", temporary=True)
    table.add("/b.py", 4)
    function = table.add(None, None, function="compute")
    arguments, points = table.source_arguments("/a.py")
    assert arguments == {"source": {"path": "/a.py"},
                         "breakpoints": [{"line": 3}, {"line": 9, "condition": "x > 1"}]}
    table.record_answer(points, [{"id": 7, "verified": True, "line": 4},
                                 {"id": 8, "verified": False}])
    assert first.line == 4 and not points[1].verified  # pydevd moved it to code
    assert table.hit([8]) == [points[1]]
    first.enabled = False
    assert table.source_arguments("/a.py")[0]["breakpoints"] == [
        {"line": 9, "condition": "x > 1"}]
    assert table.function_arguments()[0] == {"breakpoints": [{"name": "compute"}]}
    assert [p.number for p in table.visible()] == [1, 2, 3, 4]
    table.remove(function)
    with pytest.raises(CommandError):
        table.get(4)


def test_hidden_breakpoints_are_not_listed_or_numbered():
    table = BreakpointTable()
    table.add("/a.py", 3, hidden=True)
    assert table.visible() == [] and table.add("/a.py", 5).number == 1


SOURCE = textwrap.dedent("""
    import functools

    @functools.cache
    def outer(a, b=2, *rest, key, **extra):
        def inner(x):
            return x + 1
        return inner(a)

    value = outer(1, key=3)
""").lstrip()


def test_longlist_span_and_args_come_from_the_source():
    assert function_span(SOURCE, 7, "outer") == (3, 7)  # decorator included
    assert function_span(SOURCE, 6, "inner") == (5, 6)
    assert function_span(SOURCE, 9, "<module>") == (1, 9)
    assert function_arguments(SOURCE, 7, "outer") == ["a", "b", "rest", "key", "extra"]
    assert function_arguments("not python (", 1, "f") == []


def test_listing_marks_the_current_line_and_breakpoints():
    lines = ["a = 1\n", "b = 2\n", "c = 3\n"]
    assert render.listing(lines, 1, 3, 2, {3}) == [
        "   1     a = 1", "   2  -> b = 2", "   3 B   c = 3"]


def test_stack_is_shown_oldest_first_with_the_current_frame_marked():
    frames = [{"name": "inner", "line": 6, "source": {"path": "/a.py"}},
              {"name": "outer", "line": 7, "source": {"path": "/a.py"}}]
    assert render.stack_lines(frames, 1, lambda frame: f"line {frame['line']}") == [
        "> /a.py(7)outer()", "-> line 7", "  /a.py(6)inner()", "-> line 6"]


def test_evaluate_errors_look_like_pdbs():
    traceback = 'Traceback (most recent call last):\n  File "<string>", line 1\nNameError: x\n'
    assert render.evaluate_error(traceback) == "*** NameError: x"


def test_header_names_the_ray_task_and_the_exception():
    header = render.session_header({
        "id": "abc", "pid": 7, "host": "h", "node_ip": "10.0.0.2", "job_id": "01000000",
        "task_name": "preprocess", "reason": "exception",
        "exception": "ZeroDivisionError: division by zero"})
    assert header == ["session abc: task preprocess on 10.0.0.2, pid 7, job 01000000",
                      "post-mortem: ZeroDivisionError: division by zero"]
    assert render.switch_banner(2, width=20) == "── breakpoint 2 ────"


def test_highlighting_keeps_one_entry_per_line():
    source = 'x = """a\nb"""\ny = 1\n'
    coloured = render.highlight_lines(source)
    assert len(coloured) == 3 and all(line.endswith("\x1b[0m") for line in coloured)


def test_header_says_where_breakpoint_was_called_and_where_the_arrow_is():
    session = {"id": "a", "pid": 1, "file": "/job.py", "line": 47}
    assert render.session_header(session, 48)[1] == "breakpoint() at /job.py:47, next line 48"
    assert render.session_header(session, 47)[1] == "breakpoint() at /job.py:47"
    session["cluster_breakpoint"] = True  # set in an IDE or by `raydebug break`: no call
    assert render.session_header(session, 47)[1] == "cluster breakpoint at /job.py:47"


def test_a_paused_process_is_not_said_to_be_at_a_breakpoint():
    """`raydebug pause` stops a thread wherever it runs: no breakpoint() was called, and the
    line listed when it was paused (a loop's body) is not where the arrow is now."""
    session = {"id": "a", "pid": 1, "file": "/job.py", "line": 22, "reason": "pause"}
    assert render.session_header(session, 20)[1] == "paused by raydebug pause"


def test_a_thread_blocked_in_c_says_what_can_be_done_in_one_line():
    session = {"id": "a", "pid": 1, "file": "/job.py", "line": 22, "reason": "pause",
               "blocked_in_c": True}
    assert render.session_header(session, 22)[1:] == [
        "paused by raydebug pause",
        "blocked in C: its frames, locals and evaluate work now; it steps once the call "
        "returns, and stops at its next line (evaluate what unblocks it, or continue)"]


def test_an_actor_method_is_named_once():
    header = render.session_header({"id": "a", "pid": 1, "actor_class": "Trainer",
                                    "task_name": "Trainer.update", "node_ip": "10.0.0.2"})
    assert header[0] == "session a: actor Trainer.update on 10.0.0.2, pid 1"


def test_exception_info_reads_as_a_traceback_oldest_frame_first():
    trace = ('  File "/a.py", line 2, in f\n    1 / 0\n'
             '  File "/a.py", line 5, in <module> (Current frame)\n    f()\n'
             "ZeroDivisionError: division by zero\n")
    info = {"exceptionId": "ZeroDivisionError       (note: pydevd's own)",
            "description": "division by zero",
            "details": {"typeName": "ZeroDivisionError", "stackTrace": trace}}
    assert render.exception_lines(info) == [
        "Traceback (most recent call last):",
        '  File "/a.py", line 5, in <module>', "    f()",
        '  File "/a.py", line 2, in f', "    1 / 0",
        "ZeroDivisionError: division by zero"]


def test_other_threads_stopping_or_running_on_are_said_before_the_prompt():
    from types import SimpleNamespace

    from raydebug.protocol import Event
    from raydebug.terminal.debugger import TerminalDebugger
    from raydebug.terminal.remote import Stops

    stops = Stops()
    said: list[str] = []
    debugger = TerminalDebugger(SimpleNamespace(stops=stops), {}, said.append,  # type: ignore[arg-type]
                                thread_id=1)
    stops.on_stopped(Event(seq=1, event="stopped", body={"threadId": 1}))
    debugger.announce_other_stops()
    assert said == []
    stops.on_stopped(Event(seq=2, event="stopped", body={"threadId": 2}))
    debugger.announce_other_stops()
    assert said == ["(stopped too: thread 2; `thread N` switches)"]
    stops.on_continued(Event(seq=3, event="continued",
                             body={"threadId": 2, "allThreadsContinued": False}))
    debugger.announce_other_stops()
    assert said[-1] == "(thread 2 ran on: resumed by something other than this prompt)"


def test_cluster_breakpoints_join_the_table_as_the_process_names_their_files():
    from raydebug.terminal.breakpoints import BreakpointTable

    table = BreakpointTable()
    files = table.show_cluster([
        {"path": "/home/me/code/job.py", "line": 12, "condition": "i == 3",
         "hitCondition": "", "logMessage": "", "localRoot": "/home/me/code"},
        {"path": "/home/me/code/job.py", "line": 20, "condition": "", "hitCondition": ">2",
         "logMessage": "i={i}", "localRoot": None},
        {"path": 7, "line": "x"},  # malformed: skipped
    ], remote_root="/tmp/ray/working_dir_files/_ray_pkg_1")
    assert files == {"/tmp/ray/working_dir_files/_ray_pkg_1/job.py", "/home/me/code/job.py"}
    assert table.at("/tmp/ray/working_dir_files/_ray_pkg_1/job.py", 12)[0].cluster
    # Listed, never sent: the hub sets the breakpoint set in the process's pydevd itself.
    arguments, _ = table.source_arguments("/tmp/ray/working_dir_files/_ray_pkg_1/job.py")
    assert arguments["breakpoints"] == []
    shown = render.breakpoint_table(table.visible())
    assert shown[1].split()[:2] == ["1", "cluster"] and "\tstop only if i == 3" in shown
    assert "\tlog 'i={i}' (never stops)" in shown


def test_break_and_clear_send_only_the_terminals_own_and_leave_the_clusters():
    """The hub keeps the cluster's breakpoints in the process's pydevd: ``b`` and ``cl`` send
    the terminal's own, and ``cl`` of a cluster breakpoint says how to remove it."""
    from types import SimpleNamespace
    from typing import Any

    from raydebug.terminal.debugger import TerminalDebugger

    sent: list[tuple[str, dict[str, Any]]] = []

    def request(command: str, arguments: dict[str, Any]) -> dict[str, Any]:
        sent.append((command, arguments))
        return {"breakpoints": [{"id": i, "verified": True}
                                for i, _ in enumerate(arguments["breakpoints"])]}

    said: list[str] = []
    cluster = [{"path": "/job.py", "line": 12, "localRoot": None}]
    debugger = TerminalDebugger(SimpleNamespace(request=request), {}, said.append,  # type: ignore[arg-type]
                                confirm=lambda question: True,
                                cluster_breakpoints=lambda: cluster)
    debugger.breakpoints.show_cluster(cluster, remote_root=None)  # as at the attach
    debugger.do_break("/job.py:5")
    assert sent == [("setBreakpoints", {"source": {"path": "/job.py"},
                                        "breakpoints": [{"line": 5}]})]
    for arg in ("1", "/job.py:12"):
        with pytest.raises(CommandError, match=r"raydebug break --remove /job\.py:12"):
            debugger.do_clear(arg)
    with pytest.raises(CommandError, match="the cluster's"):
        debugger.do_disable("1")
    debugger.do_clear("")
    assert [(p.number, p.cluster) for p in debugger.breakpoints.visible()] == [(1, True)]
    assert sent[-2] == ("setBreakpoints", {"source": {"path": "/job.py"}, "breakpoints": []})
    cluster[0] = {"path": "/job.py", "line": 14, "localRoot": None}  # raydebug break, since
    said.clear()
    debugger.do_break("")
    assert [line.split()[1:] for line in said[1:]] == [["cluster", "keep", "yes", "/job.py:14"]]


def test_the_web_page_says_blocked_in_c_in_the_terminals_words():
    """One meaning, two renderers: the page's static format.js holds the same sentence."""
    from raydebug.session import BLOCKED_IN_C
    from raydebug.web import page_file

    text = page_file("/format.js")[0].decode()
    quoted = "".join(part.split('"')[1] for part in
                     text.split("export const BLOCKED_IN_C =", 1)[1].split(";\n", 1)[0]
                     .split("+"))
    assert quoted == BLOCKED_IN_C


def test_a_group_attachs_threads_fit_the_width_where_under_a_long_name():
    rows = [(2, "rank 0 · pid 4242 · MainThread", "step at job.py:6"),
            (7, "rank 12 · train_step · pid 4250 · MainThread", "running")]
    assert render.group_threads_lines(rows, 2, 80) == [
        "*    2  rank 0 · pid 4242 · MainThread  step at job.py:6",
        "     7  rank 12 · train_step · pid 4250 · MainThread  running"]
    narrow = render.group_threads_lines(rows, 7, 40)
    assert narrow == ["     2  rank 0 · pid 4242 · MainThread",
                      "        step at job.py:6",
                      "*    7  rank 12 · train_step · pid 4250…",
                      "        running"]
    assert all(len(line) <= 40 for line in narrow)


def test_c1_is_a_command_of_its_own_and_c_still_continue():
    assert commands.parse("c1") == commands.Command("c1")
    assert commands.parse("c").name == "continue"
    assert commands.parse("c1 = 3").name == commands.STATEMENT  # an assignment, as in pdb


def test_output_while_the_prompt_waits_goes_above_it_whole_lines_first(
        capsys: pytest.CaptureFixture[str]):
    """Another thread of the debuggee prints while the prompt waits for a line: each whole
    line goes above the prompt, drawn again after it (it was written after the prompt, and
    after what the user was typing); a piece of a line waits for its end."""
    from raydebug.terminal.console import PROMPT, Terminal

    terminal = Terminal()
    terminal._prompt = PROMPT  # input() waits (as Terminal._input sets it)
    terminal.write_output("tick 1\ntick", "stdout")
    terminal.write_output(" 2\n", "stdout")
    assert capsys.readouterr().out == (f"\r\x1b[Ktick 1\n{PROMPT}"
                                       f"\r\x1b[Ktick 2\n{PROMPT}")
    terminal.write_output("half", "stdout")
    assert capsys.readouterr().out == ""
    terminal._prompt = None
    terminal._write_held()  # the prompt is gone: the piece is printed
    assert capsys.readouterr().out == "half"
