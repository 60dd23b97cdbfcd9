"""`raydebug web`'s address (pure parts, and the tunnel record), and the page's files as
the wheel ships them."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from raydebug import web
from raydebug.cli import web_command
from raydebug.cli.web_command import PageAddress, format_page_address, page_url


def test_the_address_of_the_page():
    assert page_url("127.0.0.1:5678") == "http://127.0.0.1:5678/"
    assert page_url("0.0.0.0:5678") == "http://127.0.0.1:5678/"  # a wildcard bind
    assert page_url("[::1]:80", "a b/c") == "http://[::1]:80/?token=a%20b%2Fc"
    printed = format_page_address(PageAddress("http://127.0.0.1:1/", "127.0.0.1:1 (--hub)",
                                              asks_token=True))
    assert printed.splitlines()[0] == "http://127.0.0.1:1/" and "client token" in printed


def test_a_running_tunnel_is_found_and_a_dead_one_is_not(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert web_command.read_tunnel() is None
    record = web_command.write_tunnel(6000, "me@head")
    found = web_command.read_tunnel()
    assert found is not None and found.address == "127.0.0.1:6000"
    assert "me@head" in found.found_by
    assert oct(os.stat(web_command.tunnel_path()).st_mode)[-3:] == "600"
    web_command.remove_tunnel(record)
    assert web_command.read_tunnel() is None
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    web_command.tunnel_path().write_text(
        f'{{"port": 1, "destination": "x", "pid": {dead.stdout.strip()}}}')
    assert web_command.read_tunnel() is None


SVG_NAMESPACE = 'xmlns="http://www.w3.org/2000/svg"'


def test_the_page_files_are_plain_modules_with_nothing_inline():
    assert {"/", "/app.js", "/style.css"} <= set(web.page_files())
    page = web.page_file("/")[0].decode()
    assert "<script" in page and "<script>" not in page and "style=" not in page
    for path in web.page_files():
        text = web.page_file(path)[0].decode().replace(SVG_NAMESPACE, "")  # a name only
        assert "http://" not in text and "https://" not in text, path  # nothing from elsewhere


def test_the_wheel_ships_the_page(tmp_path: Path):
    root = Path(__file__).resolve().parents[2]
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                            "-w", str(tmp_path), str(root)], capture_output=True, text=True,
                           timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    [wheel] = tmp_path.glob("raydebug-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in set(web.page_files()) - set(web.ALIASES):
        name = "index.html" if path == "/" else path[1:]
        assert f"raydebug/web/static/{name}" in names
