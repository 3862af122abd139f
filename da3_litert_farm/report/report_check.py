"""Open the report in headless Chromium, as a reader would, and check what they would see.

    python -m da3_litert_farm.report.report_check      (what `make report` runs after the farm)

Loads artifacts/report/index.html from the file system (no server, no network) and fails
unless: the browser logged no error, every image decoded (naturalWidth > 0), the models and
letterbox tables list exactly the catalogued cells, and the stress warning shows exactly
when the catalog carries one. Then saves a full-page screenshot to artifacts/report/screenshot.png.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from da3_litert_farm.core import fileio, paths
from da3_litert_farm.report.browser_setup import Browser, find_browser

# Quiet, offline Chromium: no sandbox (root in CI), no GPU, none of its background traffic.
CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-quic", "--hide-scrollbars")
WIDTH = 1400
PAGE_STATE = """
return {
  ready: document.readyState,
  images: [...document.images].map(i => ({src: i.getAttribute('src'), complete: i.complete, width: i.naturalWidth})),
  models: [...document.querySelectorAll('#models tbody tr')].map(r => r.dataset.cell),
  letterbox: [...document.querySelectorAll('#letterbox tbody tr')].map(r => r.dataset.cell),
  warning: document.getElementById('warning') ? document.getElementById('warning').textContent : null,
  height: document.documentElement.scrollHeight,
};
"""


def open_browser(browser: Browser, profile: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser.binary
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={WIDTH},900"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=browser.driver), options=options)


def check_report(page: Path, catalog: dict, screenshot: Path | None) -> tuple[list[str], dict]:
    """(problems, what the page showed); writes the screenshot when there are none."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser = find_browser()
    if browser is None:
        return ["no Chromium/ChromeDriver: run `python -m da3_litert_farm.report.browser_setup`"], {}
    if not page.is_file():
        return [f"{page} is missing: run `dvc repro`"], {}
    with tempfile.TemporaryDirectory(prefix="report-check-") as profile:
        driver = open_browser(browser, profile)
        try:
            driver.get(page.resolve().as_uri())
            WebDriverWait(driver, 60).until(lambda d: d.execute_script(
                "return document.readyState === 'complete' && [...document.images].every(i => i.complete)"))
            state = driver.execute_script(PAGE_STATE)
            logged = driver.get_log("browser")
            problems = [f"console {e['level']}: {e['message']}" for e in logged if e["level"] in ("SEVERE", "ERROR")]
            problems += [f"image {i['src']} did not decode (naturalWidth 0)" for i in state["images"] if not i["width"]]
            expected = [m["cell"] for m in catalog["models"]]
            for table in ("models", "letterbox"):
                if state[table] != expected:
                    problems.append(f"the {table} table lists {state[table]}, the catalog {expected}")
            if bool(state["warning"]) != bool(catalog.get("warning")):
                problems.append(f"stress warning on the page: {state['warning']!r}, in the catalog: "
                                f"{catalog.get('warning')!r}")
            if not problems and screenshot is not None:
                driver.set_window_size(WIDTH, state["height"])
                problems += save_screenshot(driver, screenshot)
        finally:
            driver.quit()
    return problems, state


class _NoScreenshot(Exception):
    pass


def save_screenshot(driver, screenshot: Path) -> list[str]:
    """Write the page's screenshot atomically; on failure keep the last good one and say so."""
    try:
        with fileio.atomic_path(screenshot) as tmp:
            if not driver.save_screenshot(str(tmp)):  # selenium returns False, and writes nothing, on failure
                raise _NoScreenshot  # leave the block by an exception: atomic_path then discards the temp file
    except _NoScreenshot:
        return [f"the browser could not take the screenshot; {screenshot} is left as it was"]
    return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page", type=Path, default=paths.REPORT_PAGE)
    parser.add_argument("--catalog", type=Path, default=paths.CATALOG)
    parser.add_argument("--screenshot", type=Path, default=paths.REPORT_SCREENSHOT)
    args = parser.parse_args(argv)
    catalog = json.loads(args.catalog.read_text())
    problems, state = check_report(args.page, catalog, args.screenshot)
    for problem in problems:
        print(f"report_check: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"report_check: {args.page} loads in headless Chromium with no console error; {len(state['images'])} "
          f"images decoded; {len(state['models'])} cells listed; screenshot -> {args.screenshot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
