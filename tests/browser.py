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
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        emulate(driver, width, height, width < 600, "dark" if dark else "light")
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


VIEWPORTS = {"desktop": (1280, 800, False), "phone": (390, 844, True)}


def emulate(driver: Any, width: int, height: int, mobile: bool, scheme: str) -> None:
    """Make the page's viewport exactly ``width`` x ``height`` in ``scheme`` (light|dark)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile})
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {
        "features": [{"name": "prefers-color-scheme", "value": scheme}]})


def screenshots(driver: Any, name: str) -> list[str]:
    """With RAYDEBUG_SCREENSHOTS=DIR, save the current view at 1280x800 and 390 px wide,
    light and dark, as DIR/NAME-{desktop,phone}-{light,dark}.png (then back to desktop
    light); the paths saved."""
    directory = os.environ.get("RAYDEBUG_SCREENSHOTS")
    if not directory:
        return []
    os.makedirs(directory, exist_ok=True)
    saved = []
    for viewport, (width, height, mobile) in VIEWPORTS.items():
        for scheme in ("light", "dark"):
            emulate(driver, width, height, mobile, scheme)
            driver.execute_script("return new Promise(r => requestAnimationFrame(() => "
                                  "requestAnimationFrame(r)))")
            path = os.path.join(directory, f"{name}-{viewport}-{scheme}.png")
            driver.save_screenshot(path)
            saved.append(path)
    emulate(driver, 1280, 800, False, "light")
    return saved
