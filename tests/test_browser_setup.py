"""The browser set-up: what it would run where, and that `make test` left this machine ready."""

import subprocess
import sys

from da3_litert_farm.report.browser_setup import install_script, major


def test_debian_installs_its_own_chromium_and_driver():
    script = install_script({"ID": "debian", "VERSION_CODENAME": "bookworm"})
    assert script == ("apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
                      "chromium chromium-driver")


def test_other_systems_get_no_guess():
    for release in ({"ID": "ubuntu", "ID_LIKE": "debian"}, {"ID": "fedora"}, {}):
        assert install_script(release) is None


def test_this_machine_is_ready():
    """`make test` ran the set-up first: Chromium and a driver of the same major version."""
    proc = subprocess.run([sys.executable, "-m", "da3_litert_farm.report.browser_setup", "--check"], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    browser, driver = proc.stdout.split(" with ")
    assert browser.startswith("browser_setup: Chromium ") and driver.startswith("ChromeDriver ")
    assert major(browser) == major(driver) is not None


def test_major_version():
    assert major("Chromium 156.0.8078.114 built on Debian GNU/Linux 12 (bookworm)") == "156"
    assert major("ChromeDriver 155.0.7871.100 (8f2c...)") == "155"
