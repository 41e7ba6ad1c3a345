"""Generate kbroker's protocol codecs from Kafka's JSON message specs.

Usage (from the repository root): ``python -m tools.codegen [--spec-dir DIR] [--out DIR]``.
Defaults: ``../shared/kafka-protocol/message-spec`` (relative to the repository root) and
``kbroker/protocol``. The output is deterministic and committed; nothing at build or
run time reads the spec directory. ``generate(spec_dir, out_dir)`` is what the
staleness test calls.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SPEC_DIR = REPO_ROOT.parent / "shared" / "kafka-protocol" / "message-spec"
DEFAULT_OUT_DIR = REPO_ROOT / "kbroker" / "protocol"


def render(spec_dir: Path) -> dict[str, str]:
    """Every generated file: path relative to the output dir -> text."""
    from .enums import parse_error_codes, render_api_key, render_error_code
    from .messages import render_messages
    from .spec import load_dir

    messages = load_dir(spec_dir)
    requests = [m for m in messages if m.kind == "request"]
    files = {
        "error_code.py": render_error_code(parse_error_codes(spec_dir.parent / "error-codes.md")),
        "api_key.py": render_api_key(requests),
    }
    files.update(render_messages(messages))
    return files


def generate(spec_dir: Path = DEFAULT_SPEC_DIR, out_dir: Path = DEFAULT_OUT_DIR) -> list[Path]:
    """Write every generated file under out_dir; return the paths written."""
    written = []
    for rel, text in sorted(render(Path(spec_dir)).items()):
        path = Path(out_dir) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written
