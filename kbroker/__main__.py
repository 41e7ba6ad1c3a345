"""`python -m kbroker ...` is the `kbroker` command."""

import sys

from kbroker.cli import main

sys.exit(main())
