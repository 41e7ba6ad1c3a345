"""`python -m kbroker.perf produce|consume|e2e ...`."""

import sys

from kbroker.perf.cli import main

if __name__ == "__main__":
    sys.exit(main())
