"""A real browser for the web console's tests: Debian's ``chromium`` driven
through ``chromium-driver`` by Selenium (pinned in the test extra),
headless, with a fresh profile per test and nothing that reaches the
network (no background networking, component updates, sync or QUIC; no
Selenium Manager: both binaries are given).

Tests that need it skip, naming the package, when chromium, chromedriver or
selenium is missing. A failing browser test gets screenshots of every page
it opened and of each window as it was, saved in its tmp dir and named in
the failure message (``tests/serve/conftest.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
FLAGS = (
    "--headless=new",
    "--no-sandbox",  # the tests run as root in CI: chromium's sandbox refuses root
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--disable-features=Translate,OptimizationHints,MediaRouter",
    "--metrics-recording-only",
)


def missing() -> str | None:
    """Why a browser test cannot run here, naming what to install."""
    if CHROMIUM is None:
        return "chromium is not installed (Debian package chromium)"
    if CHROMEDRIVER is None:
        return "chromedriver is not installed (Debian package chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    return None


needs_browser = pytest.mark.skipif(missing() is not None, reason=str(missing()))


class Browser:
    """One headless Chromium and what a test asks of it."""

    def __init__(self, tmp_path: Path, width: int = 1280, height: int = 900) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager never downloads
        opts = webdriver.ChromeOptions()
        assert CHROMIUM is not None and CHROMEDRIVER is not None
        opts.binary_location = CHROMIUM
        profile = tmp_path / "chromium-profile"
        for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
            opts.add_argument(flag)
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.tmp_path = tmp_path
        self.driver = webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER))
        self.driver.set_page_load_timeout(30)
        self.visited: list[str] = []
        self.logs: list[dict[str, Any]] = []

    def quit(self) -> None:
        self.driver.quit()

    # ---------------------------------------------------------- pages

    def open(self, url: str) -> None:
        self.driver.get(url)
        if url not in self.visited:
            self.visited.append(url)
        self.wait(lambda: self.js("return document.readyState") == "complete", what="page load")

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def text(self, selector: str = "body") -> str:
        """The visible text of every element ``selector`` matches ("" for none)."""
        return str(
            self.js(
                "return [...document.querySelectorAll(arguments[0])]"
                ".map(e => e.innerText).join('\\n')",
                selector,
            )
        )

    def wait(self, pred: Callable[[], Any], timeout: float = 15.0, what: str = "") -> Any:
        end = time.monotonic() + timeout
        while True:
            got = pred()
            if got:
                return got
            if time.monotonic() > end:
                raise AssertionError(f"timed out after {timeout:g} s waiting for {what or pred}")
            time.sleep(0.05)

    def wait_text(self, needle: str, selector: str = "body", timeout: float = 15.0) -> None:
        self.wait(lambda: needle in self.text(selector), timeout, f"{needle!r} in {selector}")

    def click(self, selector: str, label: str | None = None) -> None:
        """Click the button (or link) matched by ``selector`` whose visible
        text is ``label`` (found again when a live update replaced it)."""
        self._retry(lambda: self._find(selector, label).click(), f"click {selector} {label!r}")

    def type(self, selector: str, text: str) -> None:
        """Type into the field ``selector`` (found again if it was replaced)."""
        self._retry(lambda: self._find(selector, None).send_keys(text), f"type into {selector}")

    def _find(self, selector: str, label: str | None) -> Any:
        from selenium.webdriver.common.by import By

        for el in self.driver.find_elements(By.CSS_SELECTOR, selector):
            if label is None or el.text.strip() == label:
                return el
        raise LookupError(f"no {selector} labelled {label!r} on {self.driver.current_url}")

    def _retry(self, act: Callable[[], Any], what: str, timeout: float = 10.0) -> None:
        from selenium.common.exceptions import StaleElementReferenceException

        end = time.monotonic() + timeout
        while True:
            try:
                act()
                return
            except (StaleElementReferenceException, LookupError) as exc:
                if time.monotonic() > end:
                    raise AssertionError(f"could not {what}: {exc}") from None
                time.sleep(0.1)

    # ---------------------------------------------------------- checks

    def read_log(self) -> list[dict[str, Any]]:
        """The browser's console since the last read (kept in ``logs``)."""
        got = list(self.driver.get_log("browser"))
        self.logs += got
        return got

    def console_errors(self) -> list[dict[str, Any]]:
        """Every error or warning the console printed (a CSP refusal, a
        failed load, an exception, a ``console.error``)."""
        self.read_log()
        return [e for e in self.logs if e.get("level") in ("SEVERE", "WARNING")]

    def foreign_requests(self, origin: str) -> list[str]:
        """URLs the current page fetched from anywhere but ``origin``."""
        names = self.js(
            "return performance.getEntries().map(e => e.name)"
            ".concat([location.href]).filter(n => /^[a-z]+:/.test(n))"
        )
        return [n for n in names if not n.startswith(origin + "/") and n != origin]

    # ---------------------------------------------------------- screenshots

    def screenshots(self, why: str = "failure") -> list[Path]:
        """Each window as it is, then every page the test opened, as PNGs."""
        out: list[Path] = []
        d = self.tmp_path / "screenshots"
        d.mkdir(exist_ok=True)
        try:
            for i, handle in enumerate(self.driver.window_handles):
                self.driver.switch_to.window(handle)
                p = d / f"{why}-window{i}.png"
                self.driver.save_screenshot(str(p))
                out.append(p)
            for i, url in enumerate(self.visited):
                self.driver.get(url)
                time.sleep(0.3)
                p = d / f"{why}-page{i}-{_slug(url)}.png"
                self.driver.save_screenshot(str(p))
                out.append(p)
        except Exception as exc:  # noqa: BLE001 - a dead browser still reports what it saved
            (d / "error.txt").write_text(repr(exc))
        (d / "console.json").write_text(json.dumps(self.logs, indent=1))
        return out


def _slug(url: str) -> str:
    tail = url.split("://", 1)[-1].split("/", 1)[-1] or "root"
    return "".join(c if c.isalnum() else "_" for c in tail)[:60]
