"""A real browser for the pages: Debian's headless Chromium driven by Playwright (launched as
``demo.screenshot.launch`` does, never a browser download). Under ``CI=true`` a missing
Chromium or Playwright fails the test (the Makefile installs both), elsewhere it skips."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from demo.screenshot import CHROMIUM, chromium_path, launch
from tests.support import in_ci

if TYPE_CHECKING:
    from playwright.sync_api import Page


def _missing() -> str | None:
    if importlib.util.find_spec("playwright") is None:
        return "the playwright package is not installed: run `make setup`"
    if chromium_path() is None:
        return f"{CHROMIUM} is not installed: run `make setup` (apt-get install {CHROMIUM})"
    return None


@dataclass
class Tab:
    """One page and what its console said: ``errors`` are console errors and uncaught ones."""

    page: Page
    errors: list[str] = field(default_factory=list)


@contextmanager
def tab(width: int = 1280, height: int = 720) -> Iterator[Tab]:
    reason = _missing()
    if reason is not None:
        if in_ci():
            pytest.fail(f"CI=true but no browser: {reason}", pytrace=False)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            opened = Tab(page)
            page.on(
                "console",
                lambda m: opened.errors.append(m.text) if m.type == "error" else None,
            )
            page.on("pageerror", lambda exc: opened.errors.append(str(exc)))
            yield opened
        finally:
            browser.close()
