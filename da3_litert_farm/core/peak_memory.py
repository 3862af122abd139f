"""Peak resident memory in MiB, from getrusage's ru_maxrss, whose unit depends on the system."""

from __future__ import annotations

import resource
import sys


def maxrss_to_mib(value: int, platform: str = sys.platform) -> float:
    """ru_maxrss in MiB: macOS counts bytes, Linux and the BSDs kilobytes (KiB)."""
    return value / (1 << 20) if platform == "darwin" else value / 1024


def peak_rss_mib(who: int = resource.RUSAGE_SELF) -> float:
    """The peak resident memory of this process (RUSAGE_SELF) or of its largest waited-for child
    (RUSAGE_CHILDREN), in MiB."""
    return maxrss_to_mib(resource.getrusage(who).ru_maxrss)
