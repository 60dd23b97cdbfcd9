"""`raydebug continue`'s lines: one per session continued, fitted to the terminal."""

from __future__ import annotations

from raydebug.views import continued_lines

MAIN = {"id": "8a38635a1c37", "host": "10.0.0.2", "pid": 1303, "task_name": "spin",
        "file": "/tmp/usertry/job/job.py", "line": 10}
GC = {**MAIN, "id": "94a8750e6732", "thread": "PythonGCThread",
      "file": "/root/.pyenv/versions/3.11.7/lib/python3.11/threading.py", "line": 327}
MAIN_THREAD = {**MAIN, "thread": "MainThread"}


def test_each_line_fits_60_columns_keeping_the_file_name():
    out, missed = continued_lines({"resumed": [MAIN_THREAD, GC]}, width=60)
    assert out == [  # the threads' names did not fit with the file names
        "continued 8a38635a1c37 pid 1303 spin at …/job/job.py:10",
        "continued 94a8750e6732 pid 1303 spin at …/threading.py:327",
        "continued 2 sessions in 1 process"]
    assert missed == []


def test_a_wide_terminal_shows_the_whole_place_and_which_thread(monkeypatch):
    monkeypatch.setenv("HOME", "/home/nobody")
    out, _ = continued_lines({"resumed": [MAIN_THREAD, GC]}, width=120)
    assert out[:2] == [
        "continued 8a38635a1c37  pid 1303  spin (MainThread) at /tmp/usertry/job/job.py:10",
        "continued 94a8750e6732  pid 1303  spin (PythonGCThread) at "
        "/root/.pyenv/versions/3.11.7/lib/python3.11/threading.py:327"]


def test_one_session_a_process_names_no_thread():
    out, _ = continued_lines({"resumed": [MAIN], "not_resumed": []}, width=80)
    assert out == ["continued 8a38635a1c37  pid 1303  spin at /tmp/usertry/job/job.py:10",
                   "continued 1 session in 1 process"]
