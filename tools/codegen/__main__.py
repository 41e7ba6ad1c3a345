from __future__ import annotations

import argparse
from pathlib import Path

from . import DEFAULT_OUT_DIR, DEFAULT_SPEC_DIR, generate


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.codegen", description=__doc__)
    parser.add_argument("--spec-dir", type=Path, default=DEFAULT_SPEC_DIR)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT_DIR)
    args = parser.parse_args()
    paths = generate(args.spec_dir, args.out)
    print(f"wrote {len(paths)} files under {args.out}")


if __name__ == "__main__":
    main()
