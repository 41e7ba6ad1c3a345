"""How much of the randomized tests runs against the sanitized core: scripts/test-sanitize
sets KBROKER_SANITIZED=1, and under ASan + UBSan (every allocation red-zoned, the
interpreter's included) a seeded model run or a Hypothesis example costs several times
what it costs in the release build. The release run (scripts/test's main suite) runs every
seed and example; the sanitized run takes a share of them: every code path is still
reached under the sanitizers, and the long tail of random inputs is the release run's.

Owns: nothing; reads the environment once, at import.
"""

from __future__ import annotations

import os

SANITIZED = os.environ.get("KBROKER_SANITIZED") == "1"
SHARE = 4  # the sanitized run takes one seed or example in SHARE (at least one, or MINIMUM)
MINIMUM_EXAMPLES = 25


def seeds(count: int) -> range:
    """The seeds of a seeded model test: range(count), or its first share when sanitized."""
    return range(max(1, count // SHARE) if SANITIZED else count)


def examples(count: int) -> int:
    """A Hypothesis max_examples: `count`, or its share (not under MINIMUM_EXAMPLES, nor
    above count) when sanitized."""
    return min(count, max(MINIMUM_EXAMPLES, count // SHARE)) if SANITIZED else count
