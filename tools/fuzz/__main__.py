"""python -m tools.fuzz run TARGET [libFuzzer options and corpus directories...]
python -m tools.fuzz replay TARGET FILE_OR_DIR...   (each input once, no atheris)
python -m tools.fuzz seeds                          (rewrite tools/fuzz/corpus/)

`run` instruments the target's Python modules (tools/fuzz/instrumented.py; atheris'
instrument_imports) and hands the
rest of the command line to libFuzzer (e.g. -max_total_time=60, -artifact_prefix=DIR/,
corpus directories: the first one receives new inputs). scripts/fuzz wraps it.
The Cython core is not instrumented (that needs clang's -fsanitize=fuzzer-no-link; the
machines have gcc only): the fuzzer runs it, and catches its exceptions, without
coverage feedback from inside it.
"""

from __future__ import annotations

import sys
from pathlib import Path


def _run(target: str, argv: list[str]) -> None:
    import atheris

    from tools.fuzz.instrumented import excluded

    # Only the target's own modules are instrumented: all of kbroker costs seconds at start.
    with atheris.instrument_imports(include=["kbroker"], exclude=excluded(target)):
        from tools.fuzz.targets import TARGETS
    test = TARGETS[target]
    atheris.Setup([sys.argv[0], *argv], test)
    atheris.Fuzz()


def _replay(target: str, paths: list[str]) -> int:
    """Each input once; every exception is printed (one traceback per distinct place)."""
    import traceback

    from tools.fuzz.targets import TARGETS

    test = TARGETS[target]
    files = [f for p in map(Path, paths) for f in (sorted(p.iterdir()) if p.is_dir() else [p])]
    seen: dict[tuple[str, str, int], list[Path]] = {}
    for f in files:
        try:
            data = f.read_bytes()
        except FileNotFoundError:  # a running fuzzer's corpus changes under us
            continue
        try:
            test(data)
        except Exception as e:
            last = traceback.extract_tb(e.__traceback__)[-1]
            where = (type(e).__name__, last.filename, last.lineno or 0)
            if where not in seen:
                traceback.print_exc()
            seen.setdefault(where, []).append(f)
    for (name, filename, line), found in seen.items():
        print(f"{target}: {name} at {filename}:{line}: {len(found)} input(s), e.g. {found[0]}")
    print(f"{target}: {len(files)} inputs replayed, {len(seen)} distinct finding(s)")
    return 1 if seen else 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("run", "replay", "seeds"):
        print(__doc__, file=sys.stderr)
        return 2
    if argv[0] == "seeds":
        from tools.fuzz.seeds import write_corpus

        print(write_corpus())
        return 0
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    if argv[0] == "replay":
        return _replay(argv[1], argv[2:])
    _run(argv[1], argv[2:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
