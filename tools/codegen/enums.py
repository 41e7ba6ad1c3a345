"""Generate kbroker/common/error_code.py and kbroker/protocol/api_key.py."""

from __future__ import annotations

import re
from pathlib import Path

from . import HEADER_LINE
from .kafka4_errors import RETRIABLE, kafka4_rows
from .spec import MAX_VERSION, Message, snake_case

HEADER = HEADER_LINE + ".\n"

_ROW = re.compile(r"^\|\s*(-?\d+)\s*\|\s*([A-Z0-9_]+)\s*\|\s*(.*?)\s*\|\s*$")


def parse_error_codes(path: Path) -> list[tuple[int, str, str]]:
    """Rows `| code | NAME | message |` of error-codes.md."""
    rows = []
    for line in path.read_text().splitlines():
        m = _ROW.match(line)
        if m:
            rows.append((int(m.group(1)), m.group(2), m.group(3)))
    if not rows:
        raise ValueError(f"{path}: no error code rows")
    return rows


def render_error_code(rows_39: list[tuple[int, str, str]]) -> str:
    rows = kafka4_rows(rows_39)
    out = [
        HEADER,
        '"""Kafka protocol error codes: Errors.java at 3.9 (error-codes.md) and what Kafka 4.x\n',
        'adds (tools/codegen/kafka4_errors.py), with Kafka\'s names, messages and retriable flags."""\n',
        "\n",
        "import enum\n",
        "\n",
        "\n",
        "class ErrorCode(enum.IntEnum):\n",
    ]
    for code, name, _ in rows:
        out.append(f"    {name} = {code}\n")
    out += [
        "\n",
        "    @property\n",
        "    def message(self) -> str:\n",
        '        """The default error message Kafka gives this code."""\n',
        "        return MESSAGES[self.value]\n",
        "\n",
        "    @property\n",
        "    def retriable(self) -> bool:\n",
        '        """Whether Kafka\'s exception for this code is a RetriableException."""\n',
        "        return self.value in RETRIABLE\n",
        "\n",
        "\n",
        "MESSAGES: dict[int, str] = {\n",
    ]
    for code, _, text in rows:
        out.append(f"    {code}: {text!r},\n")
    out.append("}\n")
    out.append("\n")
    out.append("# the codes whose exception extends RetriableException (Errors.toHtml's Retriable column)\n")
    out.append("RETRIABLE: frozenset[int] = frozenset({\n")
    codes = [c for c, _, _ in rows if c in RETRIABLE]
    for i in range(0, len(codes), 12):
        out.append("    " + ", ".join(str(c) for c in codes[i:i + 12]) + ",\n")
    out.append("})\n")
    return "".join(out)


# ApiKey aliases under an API's old name: (name, key). Key 74 is ListConfigResources
# since Kafka 4.1 (KIP-1142); Kafka 3.9 called it ListClientMetricsResources.
RENAMED_APIS = (("LIST_CLIENT_METRICS_RESOURCES", 74),)


def api_enum_name(msg: Message) -> str:
    return snake_case(msg.name.removesuffix("Request")).upper()


def render_api_key(requests: list[Message]) -> str:
    requests = sorted(requests, key=lambda m: m.api_key or 0)
    out = [
        HEADER,
        '"""Kafka API keys, their valid and flexible versions, and header versions.\n',
        "\n",
        "Header rules (ApiMessageTypeGenerator, 3.9 and 4.x): a request uses header v2 when its\n",
        "API version is flexible, else v1 (ControlledShutdown v0 uses v0); a response uses\n",
        "header v1 when flexible, else v0, except ApiVersions, whose response header is\n",
        "always v0 (KIP-511). Unknown API keys are treated as never flexible.\n",
        '"""\n',
        "\n",
        "import enum\n",
        "\n",
        "\n",
        "class ApiKey(enum.IntEnum):\n",
    ]
    for m in requests:
        out.append(f"    {api_enum_name(m)} = {m.api_key}\n")
    for old, key in RENAMED_APIS:
        out.append(f"    {old} = {key}  # its Kafka 3.9 name\n")
    out += [
        "\n",
        "\n",
        "# api key -> (min version, max version): the union of Kafka 3.9's and 4.x's ranges\n",
        "VALID_VERSIONS: dict[int, tuple[int, int]] = {\n",
    ]
    for m in requests:
        out.append(f"    {m.api_key}: ({m.valid[0]}, {m.valid[1]}),  # {api_enum_name(m)}\n")
    out += [
        "}\n",
        "\n",
        "# api key -> first flexible version, or None if never flexible\n",
        "FLEXIBLE_VERSIONS: dict[int, int | None] = {\n",
    ]
    for m in requests:
        first = None if m.flexible is None or m.flexible[0] > MAX_VERSION else m.flexible[0]
        out.append(f"    {m.api_key}: {first},  # {api_enum_name(m)}\n")
    out += [
        "}\n",
        "\n",
        "# api key -> the versions its spec marks latestVersionUnstable (never advertised)\n",
        "UNSTABLE_VERSIONS: dict[int, tuple[int, ...]] = {\n",
    ]
    for m in requests:
        if m.unstable_versions:
            vs = ", ".join(str(v) for v in m.unstable_versions) + ("," if len(m.unstable_versions) == 1 else "")
            out.append(f"    {m.api_key}: ({vs}),  # {api_enum_name(m)}\n")
    out += [
        "}\n",
        "\n",
        "\n",
        "def is_flexible(api_key: int, api_version: int) -> bool:\n",
        "    first = FLEXIBLE_VERSIONS.get(api_key)\n",
        "    return first is not None and api_version >= first\n",
        "\n",
        "\n",
        "def request_header_version(api_key: int, api_version: int) -> int:\n",
        "    if is_flexible(api_key, api_version):\n",
        "        return 2\n",
        "    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:\n",
        "        return 0\n",
        "    return 1\n",
        "\n",
        "\n",
        "def response_header_version(api_key: int, api_version: int) -> int:\n",
        "    if api_key == ApiKey.API_VERSIONS:\n",
        "        return 0\n",
        "    return 1 if is_flexible(api_key, api_version) else 0\n",
    ]
    return "".join(out)
