"""Make sure the report's browser check has headless Chromium and ChromeDriver; install them if not.

    python -m da3_litert_farm.report.browser_setup           find; on Debian as root, install when missing
    python -m da3_litert_farm.report.browser_setup --check   find only

The check (da3_litert_farm.report.report_check) drives Debian's own `chromium` through its
`chromium-driver` (same version, both from the system's package sources). Selenium is told
both paths, so it never downloads a browser or a driver.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

from da3_litert_farm.core.system_packages import os_release, run_install

PACKAGES = "chromium chromium-driver"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


@dataclass(frozen=True)
class Browser:
    binary: str
    driver: str


def find_browser() -> Browser | None:
    binary = next((path for name in BROWSERS if (path := shutil.which(name))), None)
    driver = shutil.which("chromedriver")
    return Browser(binary, driver) if binary and driver else None


def install_script(release: dict[str, str]) -> str | None:
    """One root shell line that installs both; None where the package names are not Debian's."""
    if release.get("ID") != "debian":  # Ubuntu ships these as snaps, under other names
        return None
    return f"apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q {PACKAGES}"


def versions(browser: Browser) -> tuple[str, str]:
    def version(path: str) -> str:
        return subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()

    return version(browser.binary), version(browser.driver)


def major(version: str) -> str | None:
    found = re.search(r"\b(\d+)\.\d+", version)
    return found.group(1) if found else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="find only, install nothing")
    args = parser.parse_args(argv)
    browser = find_browser()
    if browser is None:
        script = install_script(os_release()) if sys.platform.startswith("linux") else None
        if script is None:
            print(f"browser_setup: the report's browser check needs Chromium and ChromeDriver on PATH "
                  f"(one of {', '.join(BROWSERS)}, and chromedriver of the same version)", file=sys.stderr)
            return 1
        if args.check or os.geteuid() != 0:
            print(f"browser_setup: Chromium or ChromeDriver is missing; to install them, run:\n"
                  f"  sudo sh -c \"{script}\"", file=sys.stderr)
            return 1
        if not run_install("browser_setup", PACKAGES, script):
            return 1
        browser = find_browser()
        if browser is None:
            print(f"browser_setup: installed {PACKAGES}, but chromium or chromedriver is still not on PATH",
                  file=sys.stderr)
            return 1
    binary, driver = versions(browser)
    if major(binary) != major(driver):
        print(f"browser_setup: {binary} and {driver} differ in major version; ChromeDriver drives only its own",
              file=sys.stderr)
        return 1
    print(f"browser_setup: {binary} ({browser.binary}) with {driver.split(' (')[0]} ({browser.driver})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
