"""The page's processes and merged-stacks views in a real headless Chromium, against a real
hub and four live ranks (plain processes: Ray adds nothing to what is shown here): the
ranks grouped, the odd rank's group highlighted, its locals on click, Pause group and
Continue group."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from browser import chromium, screenshots, wait_for
from helpers import HubProcess, write_script

pytest.importorskip("selenium")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

from selenium.webdriver.common.by import By  # noqa: E402

RANKED = """
import os, threading, time

def train_step(step):
    loss = 1.0 / (step + 1)
    time.sleep(0.01)
    return loss

def train(rank):
    step = 0
    while True:
        train_step(step)
        step += 1

def wait_for_peer(lock):
    peer = "rank 0"
    # Blocked on a lock, back in Python every 50 ms (a thread blocked in C for good would
    # stop, and be listed as paused, only when it returns to Python).
    while not lock.acquire(timeout=0.05):
        pass

if os.environ["RANK"] == "3":
    lock = threading.Lock()
    lock.acquire()
    wait_for_peer(lock)
else:
    train(int(os.environ["RANK"]))
"""


def cells(browser: Any) -> list[Any]:
    return browser.find_elements(By.CSS_SELECTOR, "#icicle .icicle-cell")


def test_processes_are_grouped_and_the_odd_stack_stands_out(hub: HubProcess, tmp_path: Path):
    script = write_script(tmp_path, "ranked.py", RANKED)
    for rank in range(4):
        hub.spawn(script, RAYDEBUG_LIVE="1", RANK=str(rank), WORLD_SIZE="4")
    with chromium() as browser:
        browser.get(f"http://{hub.client_address}/#/processes")
        wait_for(browser, lambda: len(browser.find_elements(
            By.CSS_SELECTOR, "#processes tbody tr")) == 4, 60, "four processes listed")
        ranks = [row.find_elements(By.TAG_NAME, "td")[1].text for row in
                 browser.find_elements(By.CSS_SELECTOR, "#processes tbody tr")]
        assert ranks == ["0", "1", "2", "3"]  # in rank order
        browser.find_element(By.ID, "btn-refresh").click()
        odd = wait_for(browser, lambda: [c for c in cells(browser)
                                         if "odd" in c.get_attribute("class")], 30,
                       "an odd group in the icicle")
        times = "\N{MULTIPLICATION SIGN}"
        labels = [cell.text for cell in cells(browser)]
        assert f"<module> {times}4" in labels and f"train {times}3" in labels
        assert [cell.text for cell in odd] == [f"wait_for_peer {times}1"]
        odd[0].click()
        detail = browser.find_element(By.ID, "group-detail")
        wait_for(browser, lambda: "peer" in detail.text and "'rank 0'" in detail.text, 30,
                 "the group's locals")
        assert len(detail.find_elements(By.CSS_SELECTOR, "tbody tr")) == 1
        screenshots(browser, "stacks")

        browser.find_element(By.ID, "btn-pause-group").click()
        [session] = hub.wait_sessions(1)
        assert session["reason"] == "pause" and session["function"] == "wait_for_peer"
        wait_for(browser, lambda: "paused" in browser.find_element(
            By.CSS_SELECTOR, "#processes tbody tr:last-child").text, 30, "rank 3 paused")
        # The filter takes the CLI's selectors; a bad one says what is wrong.
        box = browser.find_element(By.ID, "filter-input")
        box.send_keys("rank=0-1\n")
        wait_for(browser, lambda: len(browser.find_elements(
            By.CSS_SELECTOR, "#processes tbody tr")) == 2, 30, "ranks 0 and 1 only")
        box.clear()
        box.send_keys("rank=x\n")
        wait_for(browser, lambda: "rank" in browser.find_element(By.ID, "processes-error").text,
                 30, "the selector's error")
        browser.find_element(By.CSS_SELECTOR, "nav a[data-view=sessions]").click()
        wait_for(browser, lambda: "wait_for_peer" in browser.find_element(
            By.ID, "sessions-table").text, 30, "the paused rank in the session list")

        # Continue group: the filtered group's paused thread runs on.
        browser.find_element(By.CSS_SELECTOR, "nav a[data-view=processes]").click()
        box = browser.find_element(By.ID, "filter-input")
        box.clear()
        box.send_keys("rank=3\n")
        wait_for(browser, lambda: len(browser.find_elements(
            By.CSS_SELECTOR, "#processes tbody tr")) == 1, 30, "rank 3 only")
        browser.find_element(By.ID, "btn-continue-group").click()
        wait_for(browser, lambda: "Continued 1 session in 1 process." in browser.find_element(
            By.ID, "group-detail").text, 30, "the continue said")
        hub.wait_sessions(0)
        wait_for(browser, lambda: "running" in browser.find_element(
            By.CSS_SELECTOR, "#processes tbody tr").text, 30, "rank 3 running again")
