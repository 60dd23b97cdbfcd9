"""A real headless Chromium (the system's chromium and chromedriver, Debian's packages),
driven by Selenium: nothing is downloaded. Tests skip when the browser is not installed."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

CHROMIUM = os.environ.get("RAYDEBUG_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("RAYDEBUG_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage"]

T = TypeVar("T")


@contextlib.contextmanager
def chromium(width: int = 1280, height: int = 800, dark: bool = False) -> Iterator[Any]:
    """A WebDriver for a fresh headless Chromium (its own profile), quit on exit."""
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        pytest.skip("needs Debian's chromium and chromium-driver (.ci/run installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="raydebug-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"]:
        options.add_argument(flag)
    if dark:
        options.add_argument("--force-dark-mode")
        options.add_argument("--blink-settings=preferredColorScheme=0")
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        if dark:
            driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {
                "features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_for(driver: Any, condition: Callable[[], T | None], timeout: float = 30.0,
             what: str = "the page") -> T:
    """Selenium's bounded wait for ``condition`` (a DOM check) to return something truthy;
    TimeoutError naming ``what`` after ``timeout``."""
    from selenium.common.exceptions import TimeoutException, WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    def check(_: Any) -> T | None:
        try:
            return condition()
        except WebDriverException:  # a stale element while the page re-renders
            return None

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.1).until(check)
    except TimeoutException:
        raise TimeoutError(f"{what}: not within {timeout}s") from None
