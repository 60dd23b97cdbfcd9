"""The page's debugger as a session ends and as a post-mortem opens, in a real headless
Chromium against a real hub and plain processes (Ray adds nothing here): after Continue the
view says the process went on and offers the list and the next session; a post-mortem
opens at the top, its header in view; no request of the page is answered 404 (the icon)."""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

import pytest

from browser import chromium, wait_for
from helpers import HubProcess, write_script

pytest.importorskip("selenium")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

from selenium.webdriver.common.by import By  # noqa: E402

# Pauses in work(), then, continued, returns from it and keeps running (its session ends,
# the process does not).
GOES_ON = """
import sys, threading

def work(name):
    size = len(name)
    breakpoint()
    return size

work(sys.argv[1])
print("went on", flush=True)
threading.Event().wait(120)
"""

# Raises far enough down its file that the source view must scroll to the line.
FAILS = "".join(f"# line {n}\n" for n in range(1, 60)) + """
def load(batch):
    rows = list(range(batch))
    raise ValueError(f"batch {batch} is corrupt")

load(3)
"""


def state(browser: Any) -> str:
    return str(browser.find_element(By.ID, "debugger-state").text)


def wait_state(browser: Any, expected: str, what: str) -> None:
    """Wait until the debugger's state line is ``expected``; fail saying what it was."""
    try:
        wait_for(browser, lambda: state(browser) == expected, 60, what)
    except TimeoutError:
        raise AssertionError(f"{what}: the page says {state(browser)!r}") from None


def open_session(browser: Any, hub: HubProcess, session_id: str) -> None:
    browser.get(f"http://{hub.client_address}/#/session/{session_id}")
    wait_for(browser, lambda: state(browser).startswith("paused"), 60, "paused in the page")


def test_continue_says_the_process_went_on_and_offers_the_next_session(
        hub: HubProcess, tmp_path: Path):
    script = write_script(tmp_path, "goes_on.py", GOES_ON)
    first = hub.spawn(script, "first")
    (session,) = hub.wait_sessions(1)
    hub.spawn(script, "second")
    second = next(s for s in hub.wait_sessions(2) if s["id"] != session["id"])
    with chromium() as browser:
        open_session(browser, hub, session["id"])
        browser.find_element(By.ID, "btn-continue").click()
        wait_state(browser, "the process continued; session ended", "the end said")
        assert first.stdout is not None and first.stdout.readline() == "went on\n"
        offer = browser.find_element(By.ID, "session-ended")
        wait_for(browser, lambda: browser.find_element(By.ID, "next-session").is_displayed(),
                 30, "the next session offered")
        assert "disconnected" not in state(browser) and offer.is_displayed()
        links = {a.text: a.get_attribute("href") for a in offer.find_elements(By.TAG_NAME, "a")}
        assert links["All sessions"].endswith("#/"), links
        nexts = [href for text, href in links.items() if text.startswith("Next session")]
        assert nexts and nexts[0].endswith(f"#/session/{second['id']}"), links
        browser.find_element(By.ID, "next-session").click()
        wait_for(browser, lambda: state(browser).startswith("paused"), 60, "the next one")
        assert not offer.is_displayed()  # a live session: nothing to offer
        assert second["pid"] == int(browser.find_element(By.ID, "debugger-title").text.split(
            "pid ")[-1])


def test_a_post_mortem_opens_at_the_top_and_nothing_is_missing(hub: HubProcess,
                                                                tmp_path: Path):
    with urllib.request.urlopen(f"http://{hub.client_address}/favicon.ico",
                                timeout=10) as icon:
        assert icon.status == 200 and icon.headers["Content-Type"].startswith("image/")
    hub.spawn(write_script(tmp_path, "fails.py", FAILS), RAYDEBUG_POST_MORTEM="1",
              PYTHONBREAKPOINT="0")
    (session,) = hub.wait_sessions(1)
    with chromium(1280, 800) as browser:
        open_session(browser, hub, session["id"])
        wait_for(browser, lambda: "raise ValueError" in browser.find_element(
            By.ID, "exception-traceback").text, 30, "the traceback")
        current = wait_for(browser, lambda: browser.find_element(
            By.CSS_SELECTOR, "#source li.current"), 30, "the current line")
        assert "raise ValueError" in current.text
        assert browser.execute_script("return window.scrollY") == 0
        title = browser.find_element(By.ID, "debugger-title")
        assert browser.execute_script(
            "return arguments[0].getBoundingClientRect().top", title) >= 0
        # the source box itself scrolled to the line: it is inside the box
        inside = browser.execute_script("""
            const line = arguments[0].getBoundingClientRect();
            const box = document.getElementById("source").getBoundingClientRect();
            return line.top >= box.top && line.bottom <= box.bottom;""", current)
        assert inside
        errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        assert not errors, errors


def test_the_ranks_of_a_job_are_told_apart_by_their_labels(hub: HubProcess, tmp_path: Path):
    """Two ranks paused at the same line: the list and the debugger's title say each one's
    labels, as `raydebug list` does (the rows were alike but for their pids)."""
    script = write_script(tmp_path, "goes_on.py", GOES_ON)
    for rank in ("0", "1"):
        hub.spawn(script, f"rank{rank}", RAYDEBUG_LABEL_RANK=rank)
    sessions = hub.wait_sessions(2)
    with chromium() as browser:
        browser.get(f"http://{hub.client_address}/")
        rows = lambda: browser.find_elements(By.CSS_SELECTOR, "#sessions-table tbody tr")  # noqa: E731
        wait_for(browser, lambda: len(rows()) == 2, 30, "two sessions listed")
        labels = sorted(row.find_element(By.CSS_SELECTOR, "th").text for row in rows())
        assert labels == ["goes_on.py RANK=0", "goes_on.py RANK=1"], labels
        rank1 = next(s for s in sessions if s["labels"].get("RANK") == "1")
        open_session(browser, hub, rank1["id"])
        title = browser.find_element(By.ID, "debugger-title").text
        assert title == f"goes_on.py · pid {rank1['pid']} · RANK=1", title
