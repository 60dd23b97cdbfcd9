"""The `raydebug` command as a user meets it: help, list in a real terminal at 120, 80 and 60
columns, timeouts that say so, shell completion of session ids, `run`'s options."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from devtools.terminal import on_a_terminal
from helpers import PAUSING_WORKER, TIMEOUT, HubProcess, write_script

pytestmark = pytest.mark.integration

RAYDEBUG = [sys.executable, "-m", "raydebug"]
NO_HUB = "127.0.0.1:9"  # the discard port: nothing listens there


def raydebug(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RAYDEBUG, *args], capture_output=True, text=True, timeout=TIMEOUT,
                          env={**os.environ, **env})


@pytest.mark.parametrize("columns", [120, 80, 60])
def test_list_shows_one_line_a_session_that_fits_the_terminal(hub: HubProcess, tmp_path: Path,
                                                              columns: int):
    folder = tmp_path / "a-long-directory-name" / "with-more-of-it" / "src"
    folder.mkdir(parents=True)
    script = write_script(folder, "worker.py", PAUSING_WORKER)
    hub.spawn(script)
    hub.spawn(script)
    sessions = hub.wait_sessions(2)
    shown = on_a_terminal("list", "--hub", hub.client_address, columns=columns)
    lines = shown.rstrip("\n").splitlines()
    assert lines[0].startswith(f"2 paused sessions on the hub at {hub.client_address}"), shown
    # What every session shares is said once, on the title's line where it fits.
    on_title = columns == 120
    assert ("; all: node " in lines[0]) == on_title, shown
    title = lines[:1] if on_title else lines[:2]
    assert title[-1].split("; ")[-1].startswith("all: node "), shown
    header, *rows = lines[len(title):]
    assert all(len(line) <= columns for line in lines), shown
    for session, line in zip(sessions, rows, strict=True):
        assert line.startswith(session["id"]) and str(session["pid"]) in line, shown
        assert "worker.py:2" in line, shown  # the path is cut from the left
    assert header.startswith("id") and "labels" not in header and "node" not in header, shown


def test_an_empty_list_says_so_and_where_it_looked(hub: HubProcess):
    listed = raydebug("list", "--hub", hub.client_address)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.strip() == (f"no sessions on the hub at {hub.client_address} "
                                     "(--hub): nothing is paused")


def test_list_wait_that_times_out_says_so_and_fails(hub: HubProcess, tmp_path: Path):
    hub.spawn(write_script(tmp_path, "worker.py", PAUSING_WORKER))
    hub.wait_sessions(1)
    listed = raydebug("list", "--hub", hub.client_address, "--wait", "3", "--timeout", "1")
    assert listed.returncode == 1, listed
    assert "1 paused session" in listed.stdout
    assert listed.stderr.strip() == ("raydebug: timed out after 1 s waiting for 3 sessions: "
                                     "1 exist")


def test_list_json_is_the_hubs_answer_one_session_per_line(hub: HubProcess, tmp_path: Path):
    script = write_script(tmp_path, "worker.py", PAUSING_WORKER)
    hub.spawn(script)
    hub.spawn(script)
    hub.wait_sessions(2)
    listed = raydebug("list", "--json", "--hub", hub.client_address)
    with urllib.request.urlopen(f"http://{hub.client_address}/api/sessions",
                                timeout=TIMEOUT) as answer:
        assert listed.stdout == answer.read().decode() + "\n"
    lines = listed.stdout.splitlines()
    assert len(lines) == 4 and lines[0] == "[" and lines[-1] == "]", listed.stdout
    assert [json.loads(line.rstrip(","))["pid"] for line in lines[1:3]] == \
        [s["pid"] for s in json.loads(listed.stdout)]
    # That line is served before click is imported (cli/list_json.py); through click (any
    # other option, here --wait 0: the same question) it prints the same.
    assert raydebug("list", "--json", "--hub", hub.client_address, "--wait", "0").stdout \
        == listed.stdout
    waited = raydebug("list", "--json", "--hub", hub.client_address, "--wait", "3",
                      "--timeout", "1")
    assert waited.returncode == 1 and len(json.loads(waited.stdout)) == 2, waited
    assert waited.stderr.strip() == ("raydebug: timed out after 1 s waiting for 3 sessions: "
                                     "2 exist")


def test_help_and_dash_h():
    for args in (["-h"], ["help"]):
        shown = raydebug(*args)
        assert shown.returncode == 0 and "Commands:" in shown.stdout, shown
        assert "_RAYDEBUG_COMPLETE=bash_source raydebug" in " ".join(shown.stdout.split())
    for args in (["attach", "-h"], ["help", "attach"]):
        shown = raydebug(*args)
        assert shown.returncode == 0 and "Usage: raydebug attach" in shown.stdout, shown
    for command, option in (("hub", "--max-sessions"), ("tunnel", "--local-port")):
        shown = raydebug("help", command).stdout
        described = re.search(rf"{option} \S+\s+(\S.*)", shown)
        assert described and not described.group(1).startswith("["), shown  # it has help
    unknown = raydebug("help", "nope")
    assert unknown.returncode == 2 and "no such command 'nope'" in unknown.stderr


def test_shell_completion_offers_the_session_ids(hub: HubProcess, tmp_path: Path):
    hub.spawn(write_script(tmp_path, "worker.py", PAUSING_WORKER))
    [session] = hub.wait_sessions(1)
    completed = raydebug(_RAYDEBUG_COMPLETE="bash_complete", COMP_WORDS="raydebug attach ",
                         COMP_CWORD="2", RAYDEBUG_CLIENT_ADDRESS=hub.client_address)
    assert completed.returncode == 0, completed.stderr
    assert f"plain,{session['id']}" in completed.stdout.splitlines(), completed.stdout
    prefix = session["id"][:3]
    zsh = raydebug(_RAYDEBUG_COMPLETE="zsh_complete", COMP_WORDS=f"raydebug vscode --session "
                   f"{prefix}", COMP_CWORD="3", RAYDEBUG_CLIENT_ADDRESS=hub.client_address)
    assert session["id"] in zsh.stdout and "worker.py" in zsh.stdout, zsh.stdout
    nothing = raydebug(_RAYDEBUG_COMPLETE="bash_complete", COMP_WORDS="raydebug attach ",
                       COMP_CWORD="2", RAYDEBUG_CLIENT_ADDRESS=NO_HUB)
    assert nothing.returncode == 0 and nothing.stdout.strip() == "", nothing


def test_vscode_without_a_hub_says_so_and_refuses_a_missing_local_root(tmp_path: Path):
    printed = raydebug("vscode", "--hub", NO_HUB, "--local-root", str(tmp_path))
    assert printed.returncode == 0
    assert json.loads(printed.stdout)["raydebug"] == {"localRoot": str(tmp_path.resolve())}
    assert printed.stderr.startswith(f"raydebug: no hub at {NO_HUB}"), printed.stderr
    assert printed.stderr.count("\n") == 1, printed.stderr  # one line, however long
    missing = raydebug("vscode", "--hub", NO_HUB, "--local-root", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr, missing.stderr


def test_run_options_reach_the_command_they_run():
    code = ("import os; print(os.environ.get('RAYDEBUG_POST_MORTEM'), "
            "os.environ.get('RAYDEBUG_WAIT_TIMEOUT'), os.environ['RAY_RUNTIME_ENV_HOOK'])")
    shown = raydebug("run", "--post-mortem", "--wait-timeout", "90", "--", sys.executable,
                     "-c", code)
    assert shown.stdout.split() == ["1", "90", "raydebug.integrations.ray.runtime_env_hook"], \
        shown
    # Options after the command belong to the command.
    passed_on = raydebug("run", "--", sys.executable, "-c", "import sys; print(sys.argv[1:])",
                         "--post-mortem")
    assert passed_on.stdout.strip() == "['--post-mortem']", passed_on


def test_finding_a_ray_cluster_is_bounded_and_says_why():
    pytest.importorskip("ray")
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        nothing = f"127.0.0.1:{closed.getsockname()[1]}"
    started = time.monotonic()
    refused = raydebug("list", RAY_ADDRESS=nothing)
    assert time.monotonic() - started < 10 and refused.returncode == 1
    assert f"raydebug: no Ray cluster answers at {nothing} (connection refused)" in \
        refused.stderr, refused.stderr
    malformed = raydebug("list", RAY_ADDRESS="127.0.0.1:")  # was: invalid literal for int()
    assert malformed.returncode == 1 and malformed.stderr == (
        "raydebug: '127.0.0.1:' is not a Ray cluster's address: give HOST:PORT of its GCS "
        "(what `ray start --head` printed)\n"), malformed.stderr
    with socket.socket() as silent:  # accepts connections, never speaks: not a GCS
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        stuck = raydebug("list", "--ray-address", address)
        took = time.monotonic() - started
    assert stuck.returncode == 1 and took < 25, (took, stuck.stderr)  # Ray alone takes 40 s
    # One line, and what it may be: Ray's C++, still trying, says nothing more.
    assert stuck.stderr.splitlines() == [
        f"raydebug: the Ray cluster at {address} did not answer within 10 s: its GCS process "
        "may be stopped or overloaded, or that port is not a Ray GCS's"], stuck.stderr


def test_vscode_completes_a_session_prefix_and_warns_of_an_unknown_one(hub: HubProcess,
                                                                      tmp_path: Path):
    hub.spawn(write_script(tmp_path, "worker.py", PAUSING_WORKER))
    [session] = hub.wait_sessions(1)
    printed = raydebug("vscode", "--hub", hub.client_address, "--session", session["id"][:4])
    assert json.loads(printed.stdout)["raydebug"] == {"session": session["id"]}, printed
    assert printed.stderr == ""
    unknown = raydebug("vscode", "--hub", hub.client_address, "--session", "nosuchid")
    assert json.loads(unknown.stdout)["raydebug"] == {"session": "nosuchid"}
    assert unknown.stderr.strip() == (f"raydebug: the hub lists no session 'nosuchid' now "
                                      f"(sessions: {session['id']})")
