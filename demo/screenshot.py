"""The README's picture of the timeline page, and the recorded run the browser tests draw.

    python -m demo.screenshot --png docs/timeline.png     # a fresh restart run (`make screenshot`)
    python -m demo.screenshot --from tests/fixtures/demo/restart.json --png out.png
    python -m demo.screenshot --record tests/fixtures/demo/restart.json   # a fresh run, recorded

The page is opened in Debian's Chromium (``/usr/bin/chromium``, installed by the Makefile),
driven by Playwright without a browser download of its own (:func:`launch`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from demo.model import ScenarioConfig, ScenarioResult

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Playwright

CHROMIUM = "chromium"  # Debian's package and command
WIDTH, HEIGHT = 1280, 400  # the page grows the picture to its full height


def chromium_path() -> str | None:
    return shutil.which(CHROMIUM)


def launch(playwright: Playwright) -> Browser:
    """Headless Chromium from the system (never a download); ``--no-sandbox`` as root only,
    where Chromium refuses to start with it."""
    path = chromium_path()
    if path is None:
        raise RuntimeError(f"{CHROMIUM} is not installed: run `make setup` (apt-get {CHROMIUM})")
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    return playwright.chromium.launch(executable_path=path, args=args, headless=True)


def screenshot(page_file: Path, png: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            tab = browser.new_page(
                viewport={"width": WIDTH, "height": HEIGHT}, device_scale_factor=1
            )
            tab.goto(page_file.resolve().as_uri())
            tab.wait_for_selector("section.task svg.chart")
            tab.screenshot(path=str(png), full_page=True)
        finally:
            browser.close()


def _run() -> ScenarioResult:
    from demo.scenario import run_scenario

    result = run_scenario(ScenarioConfig(variant="restart"))
    if not result.ok:
        raise SystemExit("the demo run failed: no picture of it")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    from demo.page import load, page, record

    p = argparse.ArgumentParser(prog="python -m demo.screenshot", description=__doc__)
    p.add_argument("--from", dest="source", metavar="FILE", help="a recorded run, not a fresh one")
    p.add_argument("--png", metavar="FILE", help="write the page's screenshot here")
    p.add_argument("--record", metavar="FILE", help="record a fresh run here")
    args = p.parse_args(argv)
    if not (args.png or args.record):
        p.error("nothing to do: give --png FILE and/or --record FILE")
    result = load(json.loads(Path(args.source).read_text("utf-8"))) if args.source else _run()
    if args.record:
        Path(args.record).write_text(json.dumps(record(result), indent=1) + "\n", "utf-8")
        print(f"recorded the run in {args.record}", file=sys.stderr)
    if args.png:
        with tempfile.TemporaryDirectory(prefix="otel-a2a-page-") as folder:
            page_file = Path(folder) / "timeline.html"
            page_file.write_text(page(result), encoding="utf-8")
            screenshot(page_file, Path(args.png))
        print(f"wrote {args.png}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
