"""The page against a hub with a client token, in a real headless Chromium, on a plain
process (Ray adds nothing here): the token taken from the link and kept where scripts cannot
read it, or asked for once; a breakpoint set from the gutter is the cluster's, and is hit;
a snapshot point set from it (Shift+click) captures and never pauses; the output is shown."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from browser import chromium, wait_for
from helpers import finish, start_hub, write_script

pytest.importorskip("selenium")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

WORKER = """
import os, sys, time

def step(i):
    value = i * 2
    return value

for i in range(3):
    print("step", i, flush=True)
    if i == 0:
        breakpoint()
    step(i)
deadline, i = time.monotonic() + 60, 3
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    step(i)  # runs on once the page has left, until the test says it has seen enough
    i += 1
    time.sleep(0.02)
print("done", flush=True)
"""


def get_authorized(hub: Any, path: str) -> Any:
    """``GET path`` with the hub's client token: its JSON, and its version header."""
    request = urllib.request.Request(f"http://{hub.client_address}{path}",
                                     headers={"Authorization": "Bearer s3cret"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read()), response.headers.get("Raydebug-Version")


def cluster_breakpoints(hub: Any) -> list[dict[str, Any]]:
    return list(get_authorized(hub, "/api/breakpoints")[0]["breakpoints"])


def first_snapshot(hub: Any, timeout: float = 60) -> dict[str, Any]:
    """Long-poll the hub's snapshots until one is kept; ``TimeoutError`` after ``timeout``."""
    deadline, after = time.monotonic() + timeout, ""
    while time.monotonic() < deadline:
        answer, version = get_authorized(hub, f"/api/snapshots{after}")
        if answer["snapshots"]:
            return dict(answer["snapshots"][-1])
        after = f"?after={version}&timeout={max(deadline - time.monotonic(), 0.1):.1f}"
    raise TimeoutError("no snapshot kept")


def current_line(browser: Any) -> str:
    lines = browser.find_elements(By.CSS_SELECTOR, "#source li.current code")
    return lines[0].text.strip() if lines else ""


def test_the_token_link_the_login_and_a_gutter_breakpoint(tmp_path: Path):
    hub = start_hub("--client-token", "s3cret")
    try:
        enough = tmp_path / "enough"
        proc = hub.spawn(write_script(tmp_path, "loop.py", WORKER), str(enough))
        with chromium() as browser:
            # No token: the page asks once; a wrong one is refused, the right one admitted.
            browser.get(f"http://{hub.client_address}/")
            field = wait_for(browser, lambda: browser.find_element(By.ID, "login-token")
                             if browser.find_element(By.ID, "login-view").is_displayed()
                             else None, 30, "the token prompt")
            field.send_keys("wrong\n")
            wait_for(browser, lambda: "not this hub's" in browser.find_element(
                By.ID, "login-error").text, 30, "a wrong token refused")
            field.clear()
            field.send_keys("s3cret\n")
            wait_for(browser, lambda: browser.find_elements(
                By.CSS_SELECTOR, "#sessions-table tbody tr"), 30, "the session listed")
            assert browser.execute_script("return document.cookie") == ""  # HttpOnly

        with chromium() as browser:
            # The link `raydebug web --client-token` prints: the token leaves the address bar.
            browser.get(f"http://{hub.client_address}/?token=s3cret")
            wait_for(browser, lambda: browser.find_elements(
                By.CSS_SELECTOR, "#sessions-table tbody tr"), 30, "the session listed")
            assert "token" not in browser.current_url
            assert browser.execute_script("return document.cookie") == ""
            browser.find_element(By.CSS_SELECTOR, "#sessions-table tbody tr a").click()
            wait_for(browser, lambda: current_line(browser) == "step(i)", 30, "paused")

            gutter = browser.find_element(By.CSS_SELECTOR, "#source li[data-line='5'] .gutter")
            assert gutter.accessible_name == "Breakpoint at line 5"
            gutter.click()
            wait_for(browser, lambda: gutter.get_attribute("aria-pressed") == "true", 10,
                     "the breakpoint marked")
            browser.find_element(By.ID, "btn-continue").click()
            wait_for(browser, lambda: current_line(browser) == "return value", 30,
                     "stopped at the gutter's breakpoint")
            frames = browser.find_elements(By.CSS_SELECTOR, "#stack li")
            assert frames[0].text.startswith("step loop.py:5")
            browser.find_element(By.ID, "btn-continue").click()  # i == 1: it stops again
            wait_for(browser, lambda: "step 1" in browser.find_element(By.ID, "output").text
                     and current_line(browser) == "return value", 30, "the output, stopped")
            # The gutter's breakpoint is the cluster's (every linked process arms it) ...
            assert [(b["path"], b["line"], b["client"]) for b in cluster_breakpoints(hub)] \
                == [(str(tmp_path / "loop.py"), 5, "web page")]
            def gutter_5() -> Any:  # the source is drawn again at every stop
                return browser.find_element(By.CSS_SELECTOR, "#source li[data-line='5'] .gutter")

            assert gutter_5().get_attribute("aria-pressed") == "true"
            gutter_5().click()  # ... until the gutter takes it back
            wait_for(browser, lambda: gutter_5().get_attribute("aria-pressed") == "false", 10,
                     "the breakpoint unmarked")
            wait_for(browser, lambda: not cluster_breakpoints(hub), 10, "the cluster's gone")
            # Shift+click: a snapshot point, which captures and never pauses.
            gutter_4 = browser.find_element(By.CSS_SELECTOR, "#source li[data-line='4'] .gutter")
            ActionChains(browser).key_down(Keys.SHIFT).click(gutter_4).key_up(Keys.SHIFT) \
                .perform()
            wait_for(browser, lambda: gutter_4.get_attribute("data-kind") == "snapshot", 10,
                     "the snapshot point marked")
            wait_for(browser, lambda: [(b["line"], b["logMessage"]) for b in
                                       cluster_breakpoints(hub)] == [(4, "{snapshot}")],
                     10, "the cluster's snapshot point")
            browser.find_element(By.ID, "btn-detach").click()  # runs on, never paused
        snapshot = first_snapshot(hub)
        assert (snapshot["reason"], snapshot["line"], snapshot["function"]) == \
            ("snapshot", 4, "step")
        enough.touch()
        code, out, _ = finish(proc)
        assert code == 0 and "done" in out
    finally:
        hub.close()
