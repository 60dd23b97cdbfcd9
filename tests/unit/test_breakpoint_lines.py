"""`raydebug break --list`'s lines in a narrow terminal: the path gives way, the rest stays."""

from __future__ import annotations

from raydebug.cli.breakpoints import format_breakpoints

LOGPOINT = {"path": "/tmp/usertry/job/job.py", "line": 11, "logMessage": "total={total}",
            "verified": True, "client": "terminal"}


def test_a_line_too_wide_has_its_path_cut_from_the_left():
    """Found by use at 60 columns: "/tmp/usertry/job/job.py:11 log 'total={total}'
    [verified] (" / "terminal)"."""
    assert format_breakpoints([LOGPOINT], width=60) == (
        "…/job/job.py:11 log 'total={total}'  [verified] (terminal)")


def test_a_line_that_fits_or_no_width_keeps_its_whole_path():
    whole = "/tmp/usertry/job/job.py:11 log 'total={total}'  [verified] (terminal)"
    assert format_breakpoints([LOGPOINT], width=80) == whole
    assert format_breakpoints([LOGPOINT]) == whole


def test_the_file_name_stays_however_narrow():
    assert format_breakpoints([LOGPOINT], width=20).startswith("…/job.py:11 log ")
