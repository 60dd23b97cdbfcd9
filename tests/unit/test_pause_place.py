"""Where a pause notice says a session paused: the exception of a post-mortem, named and
shortened; a `raydebug pause` said as such."""

from __future__ import annotations

from raydebug.agent.metadata import describe_exception
from raydebug.agent.report import EXCEPTION_WIDTH, pause_place
from raydebug.session import REASON_EXCEPTION, REASON_PAUSE, PausedThread


def paused(reason: str, exception: BaseException | None = None) -> PausedThread:
    return PausedThread(id="s1", pid=1, host="h", file="/srv/seed_job.py", line=23,
                        function="seed", reason=reason,
                        exception=describe_exception(exception) if exception else None)


def raised(error: BaseException) -> BaseException:
    try:
        raise error
    except BaseException as caught:
        return caught


def test_a_breakpoint_is_its_place():
    assert pause_place(paused("breakpoint")) == "/srv/seed_job.py:23"


def test_a_post_mortem_names_its_exception():
    record = paused(REASON_EXCEPTION, raised(ZeroDivisionError("division by zero")))
    assert pause_place(record) == "/srv/seed_job.py:23 on ZeroDivisionError: division by zero"


def test_a_long_or_many_lined_exception_is_one_short_line():
    record = paused(REASON_EXCEPTION, raised(ValueError("bad row " + "x" * 300 + "\nmore")))
    place = pause_place(record)
    said = place.split(" on ", 1)[1]
    assert said.startswith("ValueError: bad row xxx") and said.endswith("...")
    assert len(said) == EXCEPTION_WIDTH and "\n" not in place


def test_a_syntax_error_is_named_by_its_own_line_not_the_code_it_quotes():
    try:
        compile("x = (", "f.py", "exec")
    except SyntaxError as error:
        record = paused(REASON_EXCEPTION, error)
    assert pause_place(record).split(" on ", 1)[1].startswith("SyntaxError: ")


def test_a_requested_pause_says_who_asked():
    assert pause_place(paused(REASON_PAUSE)) == "/srv/seed_job.py:23 by raydebug pause"


def test_a_waiting_notice_names_the_attach_command_and_the_hubs_agent_port():
    """Found by use: '(hub: 192.0.2.2:32913)' read as the address to give `--hub`; it is
    where the process links, not where a client connects."""
    from raydebug.agent.report import waiting_notice

    assert waiting_notice(paused(REASON_PAUSE), "10.0.0.2:32913", " (limit)") == (
        "session s1 paused at /srv/seed_job.py:23 by raydebug pause, waiting for a debugger: "
        "raydebug attach s1 (hub agent port 10.0.0.2:32913) (limit)")
