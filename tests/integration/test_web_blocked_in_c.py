"""The web page says what a session blocked in C means, in one line: a badge in the session
list (the line as its title), and the debugger's state while that thread is shown. A real
headless Chromium, a real hub, a real process paused by `raydebug pause`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from browser import chromium, wait_for
from helpers import BLOCKED_WORKER, HubProcess, raydebug, read_line, write_script
from raydebug.session import BLOCKED_IN_C

pytest.importorskip("selenium")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402


def state(browser: Any) -> str:
    return str(browser.find_element(By.ID, "debugger-state").text)


def test_the_page_says_what_blocked_in_c_means(hub: HubProcess, tmp_path: Path):
    script = write_script(tmp_path, "blocked.py", BLOCKED_WORKER)
    proc = hub.spawn_linked(script)
    assert read_line(proc).split() == ["started", str(proc.pid)]
    assert raydebug(hub, "pause", f"pid={proc.pid}").returncode == 0
    blocked = {s["thread"]: s for s in hub.wait_sessions(2)}["blocked-worker"]
    with chromium() as browser:
        browser.get(f"http://{hub.client_address}/")
        badge = wait_for(browser, lambda: browser.find_element(
            By.CSS_SELECTOR, f'tr[data-session="{blocked["id"]}"] .badge.blocked'),
            60, "the blocked badge")
        assert badge.text == "blocked in C" and badge.get_attribute("title") == BLOCKED_IN_C

        browser.get(f"http://{hub.client_address}/#/session/{blocked['id']}")
        wait_for(browser, lambda: state(browser).startswith("paused"), 60, "paused")
        threads = Select(browser.find_element(By.ID, "thread-select"))
        wait_for(browser, lambda: [o for o in threads.options
                                   if o.text.startswith("blocked-worker ")], 30, "threads")
        worker = next(o for o in threads.options if o.text.startswith("blocked-worker "))
        threads.select_by_value(worker.get_attribute("value"))
        wait_for(browser, lambda: state(browser) == f"paused (pause) · {BLOCKED_IN_C}", 30,
                 "the blocked thread's state line")
        main = next(o for o in threads.options if o.text.startswith("MainThread "))
        threads.select_by_value(main.get_attribute("value"))
        wait_for(browser, lambda: state(browser) == "paused (pause)", 30,
                 "the main thread's state line")
