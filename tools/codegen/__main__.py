"""python -m tools.codegen: regenerate kbroker's protocol code (see the package docstring)."""

from __future__ import annotations

import argparse
from pathlib import Path

from . import DEFAULT_OUT_DIR, DEFAULT_SPECS, generate


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.codegen", description=__doc__)
    parser.add_argument("--specs", type=Path, default=DEFAULT_SPECS,
                        help="folder holding message-spec/ (3.9) and message-spec-4x/")
    parser.add_argument("--spec-dir", type=Path, help="Kafka 3.9's specs (default SPECS/message-spec)")
    parser.add_argument("--spec-4x-dir", type=Path, help="Kafka 4.x's specs (default SPECS/message-spec-4x)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT_DIR)
    args = parser.parse_args()
    spec_dir = args.spec_dir or args.specs / "message-spec"
    spec_4x_dir = args.spec_4x_dir or args.specs / "message-spec-4x"
    paths = generate(spec_dir, args.out, spec_4x_dir)
    print(f"wrote {len(paths)} files under {args.out}")


if __name__ == "__main__":
    main()
