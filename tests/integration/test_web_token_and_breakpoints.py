"""The page against a hub with a client token, in a real headless Chromium, on a plain
process (Ray adds nothing here): the token taken from the link and kept where scripts cannot
read it, or asked for once; a breakpoint set from the gutter is the cluster's, and is hit;
the output is shown."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from browser import chromium, wait_for
from helpers import finish, start_hub, write_script

pytest.importorskip("selenium")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

from selenium.webdriver.common.by import By  # noqa: E402

WORKER = """
def step(i):
    value = i * 2
    return value

for i in range(3):
    print("step", i, flush=True)
    if i == 0:
        breakpoint()
    step(i)
print("done", flush=True)
"""


def cluster_breakpoints(hub: Any) -> list[dict[str, Any]]:
    request = urllib.request.Request(f"http://{hub.client_address}/api/breakpoints",
                                     headers={"Authorization": "Bearer s3cret"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return list(json.loads(response.read())["breakpoints"])


def current_line(browser: Any) -> str:
    lines = browser.find_elements(By.CSS_SELECTOR, "#source li.current code")
    return lines[0].text.strip() if lines else ""


def test_the_token_link_the_login_and_a_gutter_breakpoint(tmp_path: Path):
    hub = start_hub("--client-token", "s3cret")
    try:
        proc = hub.spawn(write_script(tmp_path, "loop.py", WORKER))
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

            gutter = browser.find_element(By.CSS_SELECTOR, "#source li[data-line='3'] .gutter")
            assert gutter.accessible_name == "Breakpoint at line 3"
            gutter.click()
            wait_for(browser, lambda: gutter.get_attribute("aria-pressed") == "true", 10,
                     "the breakpoint marked")
            browser.find_element(By.ID, "btn-continue").click()
            wait_for(browser, lambda: current_line(browser) == "return value", 30,
                     "stopped at the gutter's breakpoint")
            frames = browser.find_elements(By.CSS_SELECTOR, "#stack li")
            assert frames[0].text.startswith("step loop.py:3")
            browser.find_element(By.ID, "btn-continue").click()  # i == 1: it stops again
            wait_for(browser, lambda: "step 1" in browser.find_element(By.ID, "output").text
                     and current_line(browser) == "return value", 30, "the output, stopped")
            # The gutter's breakpoint is the cluster's (every linked process arms it) ...
            assert [(b["path"], b["line"], b["client"]) for b in cluster_breakpoints(hub)] \
                == [(str(tmp_path / "loop.py"), 3, "web page")]
            def gutter_3() -> Any:  # the source is drawn again at every stop
                return browser.find_element(By.CSS_SELECTOR, "#source li[data-line='3'] .gutter")

            assert gutter_3().get_attribute("aria-pressed") == "true"
            gutter_3().click()  # ... until the gutter takes it back
            wait_for(browser, lambda: gutter_3().get_attribute("aria-pressed") == "false", 10,
                     "the breakpoint unmarked")
            wait_for(browser, lambda: not cluster_breakpoints(hub), 10, "the cluster's gone")
            browser.find_element(By.ID, "btn-detach").click()  # no breakpoint: runs to the end
        code, out, _ = finish(proc)
        assert code == 0 and "done" in out
    finally:
        hub.close()
