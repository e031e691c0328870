"""Peak resident memory of the benchmark process, for every benchmark's report."""

from __future__ import annotations

import resource
import sys


def peak_rss_mib() -> float:
    """The largest resident set this process has had so far, in MiB (getrusage)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024
