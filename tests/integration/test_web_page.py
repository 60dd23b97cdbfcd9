"""The web page in a real headless Chromium against a real Ray job: the session list, the
debugger (source, stack, variables, console, stepping, continue) and the post-mortem view,
with nothing reloaded. With RAYDEBUG_SCREENSHOTS=docs/screenshots it also takes the README's
screenshots."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from browser import chromium, screenshots, wait_for
from helpers import finish, stop, write_script
from ray_cluster import LOOPBACK, raydebug_cli

pytest.importorskip("ray")
pytest.importorskip("selenium")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

from selenium.webdriver.common.by import By  # noqa: E402

JOB = """
import sys
import ray

ray.init(address=sys.argv[1])  # knows nothing of raydebug: `raydebug run` enables it

@ray.remote(num_cpus=0)
def train_shard(shard):
    config = {"learning_rate": 0.01, "layers": [64, 32], "name": f"shard-{shard}"}
    loss = shard * 10
    breakpoint()
    loss += 1
    return loss

@ray.remote(num_cpus=0, max_retries=0)
def load_batch(batch):
    rows = list(range(batch))
    raise ValueError(f"batch {batch} is corrupt")

shards = [train_shard.remote(1), train_shard.remote(2)]
failing = load_batch.remote(3)
print("results", sorted(ray.get(shards)), flush=True)
try:
    ray.get(failing)
except ray.exceptions.RayTaskError as error:
    print("driver got:", error.cause, flush=True)
print("job done", flush=True)
"""


RAY_NODES = ({"num_cpus": 3},)  # the module's cluster (the ``cluster`` fixture)


def rows(driver: Any) -> list[Any]:
    return driver.find_elements(By.CSS_SELECTOR, "#sessions-table tbody tr")


def click(driver: Any, name: str) -> None:
    """Click the one shown button whose accessible name is ``name`` (what a screen reader
    announces), as soon as there is one: the page renders its buttons again as a session's
    state changes, and one found just before went stale (a fresh-clone run)."""
    def clicked() -> bool | None:
        found = [b for b in driver.find_elements(By.TAG_NAME, "button")
                 if b.is_displayed() and b.accessible_name == name]
        if len(found) != 1:
            return None
        found[0].click()
        return True

    wait_for(driver, clicked, 30, f"one {name!r} button to click")


def current_line(driver: Any) -> str:
    lines = driver.find_elements(By.CSS_SELECTOR, "#source li.current code")
    return lines[0].text.strip() if lines else ""


def open_session(driver: Any, task: str, index: int = 0) -> None:
    links = [row.find_element(By.TAG_NAME, "a") for row in rows(driver)
             if row.find_element(By.TAG_NAME, "a").text == task]
    links[index].click()
    wait_for(driver, lambda: driver.find_element(By.ID, "debugger-state").text.startswith(
        "paused"), 60, f"{task} paused in the debugger")


def test_the_page_lists_debugs_and_lets_tasks_finish(cluster: Any, tmp_path: Path):
    job = write_script(tmp_path, "job.py", JOB)
    env = {**os.environ, **LOOPBACK, "RAYDEBUG_POST_MORTEM": "1",
           "RAYDEBUG_WAIT_TIMEOUT": "300", "PYTHONUNBUFFERED": "1"}
    driver_process = subprocess.Popen(
        [sys.executable, "-m", "raydebug", "run", "--", sys.executable, str(job),
         cluster.address], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        listed = raydebug_cli("list", "--ray-address", cluster.address, "--json",
                              "--wait", "3", "--timeout", "240")
        assert len(json.loads(listed.stdout)) == 3, listed.stderr
        printed = raydebug_cli("web", "--ray-address", cluster.address)
        assert printed.returncode == 0, printed.stderr
        url = printed.stdout.splitlines()[0]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/")

        with chromium() as browser:
            browser.get(url)
            browser.execute_script("window.notReloaded = true")
            wait_for(browser, lambda: len(rows(browser)) == 3, 30, "three sessions listed")
            names = sorted(row.find_element(By.TAG_NAME, "a").text for row in rows(browser))
            assert names == ["load_batch", "train_shard", "train_shard"]
            failed = next(row for row in rows(browser) if "load_batch" in row.text)
            assert "exception" in failed.text and "ValueError: batch 3 is corrupt" in failed.text
            screenshots(browser, "sessions")

            # A paused task: source line and stack
            open_session(browser, "train_shard")
            wait_for(browser, lambda: current_line(browser) == "loss += 1", 30, "source line")
            frames = browser.find_elements(By.CSS_SELECTOR, "#stack li")
            assert frames and frames[0].text.startswith("train_shard job.py:")
            assert browser.find_element(By.ID, "source-path").text.endswith("job.py")

            # Expanding a variable shows its children (an ARIA tree)
            tree = browser.find_element(By.ID, "variables")
            assert tree.get_attribute("role") == "tree"
            config = wait_for(browser, lambda: next(
                (item for item in tree.find_elements(By.CSS_SELECTOR, "li[role=treeitem]")
                 if item.find_element(By.CLASS_NAME, "name").text == "config"), None), 30,
                "the variable config")
            assert config.get_attribute("aria-expanded") == "false"
            config.find_element(By.CLASS_NAME, "label").click()
            wait_for(browser, lambda: {"'learning_rate'", "'layers'", "'name'"} <= {
                name.text for name in config.find_elements(
                    By.CSS_SELECTOR, "ul[role=group] .name")}, 30, "config's children")
            assert config.get_attribute("aria-expanded") == "true"

            # The console evaluates in the selected frame
            console = browser.find_element(By.ID, "console-input")
            console.send_keys("loss * 2 + len(config['layers'])")
            click(browser, "Evaluate")
            wait_for(browser, lambda: any(
                value.text in ("22", "42") for value in browser.find_elements(
                    By.CSS_SELECTOR, "#console-log .result .value")), 30, "the console's answer")
            browser.find_element(By.ID, "watch-input").send_keys("config['name']")
            click(browser, "Add watch")
            wait_for(browser, lambda: "'shard-" in browser.find_element(By.ID, "watches").text,
                     30, "the watch's value")
            shard_loss = (next(int(v.text) for v in browser.find_elements(
                By.CSS_SELECTOR, "#console-log .result .value")) - 2) // 2  # loss * 2 + 2
            screenshots(browser, "debugger")

            # Step over moves the line; Continue lets the task finish: it leaves the list
            click(browser, "Step over")
            wait_for(browser, lambda: current_line(browser) == "return loss", 30, "stepped")
            click(browser, "Continue")
            ended = "the process continued; session ended"  # the worker runs on, task done
            wait_for(browser, lambda: browser.find_element(By.ID, "debugger-state").text ==
                     ended, 60, "the session's end")
            browser.find_element(By.CSS_SELECTOR, "a.back").click()
            wait_for(browser, lambda: len(rows(browser)) == 2, 60, "the finished task gone")
            assert browser.execute_script("return window.notReloaded") is True

            # The post-mortem shows the exception and its traceback first
            open_session(browser, "load_batch")
            panel = browser.find_element(By.ID, "exception-panel")
            assert panel.is_displayed()
            assert "ValueError: batch 3 is corrupt" in panel.text
            wait_for(browser, lambda: "raise ValueError" in browser.find_element(
                By.ID, "exception-traceback").text or "load_batch" in browser.find_element(
                By.ID, "exception-traceback").text, 30, "the traceback")
            assert panel.location["y"] < browser.find_element(By.ID, "source").location["y"]
            screenshots(browser, "post-mortem")
            click(browser, "Continue")
            browser.find_element(By.CSS_SELECTOR, "a.back").click()
            wait_for(browser, lambda: len(rows(browser)) == 1, 60, "the failed task gone")

            open_session(browser, "train_shard")
            click(browser, "Continue")
            browser.find_element(By.CSS_SELECTOR, "a.back").click()
            wait_for(browser, lambda: not rows(browser), 60, "every session gone")
            assert browser.execute_script("return window.notReloaded") is True

        code, out, err = finish(driver_process, timeout=180)
        assert code == 0, err[-3000:]
        assert "results [11, 21]" in out and shard_loss in (10, 20)
        assert "driver got: batch 3 is corrupt" in out and "job done" in out
    finally:
        stop(driver_process)
