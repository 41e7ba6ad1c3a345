"""The Python modules each fuzz target's coverage is taken from (atheris instruments them
as they are imported; instrumenting all of kbroker costs seconds at every start)."""

from __future__ import annotations

from pathlib import Path

_PROTOCOL = ("kbroker.protocol",)
INSTRUMENTED: dict[str, tuple[str, ...]] = {
    "frame": (*_PROTOCOL, "kbroker.server.network_receive", "kbroker.server.request_dispatcher",
              "kbroker.server.apis.api_versions"),
    "requests": (*_PROTOCOL, "kbroker.server.request_dispatcher"),
    "produce": ("kbroker.records", "kbroker.storage", "kbroker.server.apis.produce"),
    "sasl": ("kbroker.security", "kbroker.server.authenticator"),
}


def excluded(target: str) -> list[str]:
    """Every kbroker module outside the target's (atheris' include works on whole top-level
    packages; its exclude on module names)."""
    root = Path(__file__).resolve().parents[2] / "kbroker"
    keep = INSTRUMENTED[target]
    out = []
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if not any(name == k or name.startswith(k + ".") for k in keep):
            out.append(name)
    return out
