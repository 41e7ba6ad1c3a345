"""The open-file limit: raised to the hard limit at start, as the JVM does for Kafka.

HotSpot raises its soft RLIMIT_NOFILE to the hard limit at start (-XX:+MaxFDLimit,
on by default), so a Kafka broker never meets the 1024 soft limit that desktops
and containers hand out. `kbroker serve` does the same; it is process-wide, so an
embedded Broker leaves its host process's limit alone.
"""

from __future__ import annotations

import logging
import resource

log = logging.getLogger(__name__)


def raise_open_file_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; return the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as e:
            log.warning("could not raise the open-file limit from %d to %d: %s", soft, target, e)
    return soft


def open_file_limit() -> int:
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]
