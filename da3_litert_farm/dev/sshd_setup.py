"""Make sure OpenSSH's server is installed, for the tests that publish to and pull from an SSH remote.

    python -m da3_litert_farm.dev.sshd_setup           find; on Debian as root, install when missing
    python -m da3_litert_farm.dev.sshd_setup --check   find only

The tests (tests/remote_servers.py) start their own `sshd` on a loopback port with a throwaway
key and stop it when they end; nothing here starts or enables the system's SSH service.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from da3_litert_farm.core.system_packages import os_release, run_install

PACKAGES = "openssh-server openssh-client"
# Debian's policy-rc.d convention (exit 101): dpkg must not start the service it installs, so no
# sshd listens on port 22 afterwards. A policy-rc.d already there is left as it is.
SCRIPT = ("apt-get update -q && own=0 && if [ ! -e /usr/sbin/policy-rc.d ]; then own=1; "
          "printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; fi; "
          f"DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends {PACKAGES}; status=$?; "
          "if [ $own = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi; exit $status")


def find_sshd() -> str | None:
    """The sshd binary (Debian keeps it off a normal user's PATH)."""
    found = shutil.which("sshd") or next((str(p) for p in (Path("/usr/sbin/sshd"),) if p.is_file()), None)
    return found if found and shutil.which("ssh-keygen") else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="find only, install nothing")
    args = parser.parse_args(argv)
    if find_sshd() is None:
        if os_release().get("ID") != "debian" or args.check or os.geteuid() != 0:
            print(f"sshd_setup: the SSH remote tests need OpenSSH's sshd and ssh-keygen; on Debian/Ubuntu: "
                  f"sudo apt-get install {PACKAGES}", file=sys.stderr)
            return 1
        if not run_install("sshd_setup", PACKAGES, SCRIPT) or find_sshd() is None:
            print(f"sshd_setup: installing {PACKAGES} did not give sshd and ssh-keygen", file=sys.stderr)
            return 1
    print(f"sshd_setup: {find_sshd()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
