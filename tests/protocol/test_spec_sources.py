"""Each generated version has exactly the fields of the spec file it came from.

tools/codegen merges Kafka 3.9's and 4.x's message specs: a version 4.x defines comes
from 4.x's file, an older one from 3.9's. This test reads the JSON files itself (not
through the generator) and, for every generated message at every version, compares
the fields present in that version, in order and nested structs included (name, type,
nullability, tagging and tag), with that version's source file. It also checks what
the generator promises besides: the versions are the union of both ranges, the APIs
Kafka 4 removed keep their 3.9 versions, and latestVersionUnstable is recorded.

Skipped, like test_codegen_fresh, when the specs are absent and KBROKER_NO_SPECS=1.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for tools/

from kbroker.protocol import messages  # noqa: E402
from kbroker.protocol.api_key import UNSTABLE_VERSIONS, VALID_VERSIONS  # noqa: E402
from kbroker.protocol.messages.request_header import RequestHeader  # noqa: E402
from kbroker.protocol.messages.response_header import ResponseHeader  # noqa: E402
from tools.codegen import DEFAULT_SPEC_4X_DIR, DEFAULT_SPEC_DIR  # noqa: E402

MAX = 0x7FFF
_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*')
_PRIMITIVE = re.compile(r"^(bool|u?int(8|16|32|64)|float64|string|bytes|uuid|records)$")


def _specs_or_skip() -> None:
    if DEFAULT_SPEC_DIR.is_dir() and DEFAULT_SPEC_4X_DIR.is_dir():
        return
    if os.environ.get("KBROKER_NO_SPECS") == "1":
        pytest.skip("KBROKER_NO_SPECS=1 and the message specs are absent")
    pytest.fail(f"message specs not found at {DEFAULT_SPEC_DIR} and {DEFAULT_SPEC_4X_DIR}")


def _load(path: Path) -> dict[str, Any]:
    text = _TOKEN.sub(lambda m: m.group(0) if m.group(0).startswith('"') else "", path.read_text())
    return json.loads(text)


def _range(text: str | None) -> tuple[int, int] | None:
    if text is None or text == "none":
        return None
    if text.endswith("+"):
        return (int(text[:-1]), MAX)
    lo, _, hi = text.partition("-")
    return (int(lo), int(hi or lo))


def _has(text: str | None, v: int) -> bool:
    r = _range(text)
    return r is not None and r[0] <= v <= r[1]


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _spec_fields(specs: list[dict], common: dict[str, dict], v: int) -> list[tuple]:
    out = []
    for f in specs:
        if not _has(f.get("versions"), v):
            continue
        etype = f["type"].removeprefix("[]")
        children = None
        if not _PRIMITIVE.match(etype):
            children = _spec_fields(f.get("fields") or common[etype]["fields"], common, v)
        tagged = _has(f.get("taggedVersions", f["versions"] if "tag" in f else None), v)
        out.append((
            _snake(f["name"]),
            f["type"] if children is None else f["type"].replace(etype, "struct"),
            _has(f.get("nullableVersions"), v),
            tagged,
            int(f["tag"]) if tagged else None,
            children,
        ))
    return out


def _our_fields(cls: type, top: type, v: int) -> list[tuple]:
    out = []
    for f in cls.FIELDS:
        if not f.present(v):
            continue
        etype = f.type.removeprefix("[]")
        children = None
        if not _PRIMITIVE.match(etype):
            children = _our_fields(getattr(top, etype), top, v)
        out.append((
            f.name.rstrip("_"),
            f.type if children is None else f.type.replace(etype, "struct"),
            f.nullable(v),
            f.tagged(v),
            f.tag if f.tagged(v) else None,
            children,
        ))
    return out


def _files(folder: Path) -> dict[tuple[str, object], dict[str, Any]]:
    """Spec files by (kind, api key) for requests/responses, (kind, name) otherwise."""
    found = {}
    for path in folder.glob("*.json"):
        raw = _load(path)
        key = raw.get("apiKey") if raw["type"] in ("request", "response") else raw["name"]
        found[(raw["type"], key)] = raw
    return found


def _generated() -> list[tuple[str, object, type]]:
    out: list[tuple[str, object, type]] = []
    for key, cls in messages.REQUESTS.items():
        out.append(("request", key, cls))
    for key, cls in messages.RESPONSES.items():
        out.append(("response", key, cls))
    out += [("header", "RequestHeader", RequestHeader), ("header", "ResponseHeader", ResponseHeader)]
    for name in messages.__all__:
        cls = getattr(messages, name)
        if isinstance(cls, type) and not hasattr(cls, "API_KEY") and not name.endswith("Header"):
            if name not in ("REQUESTS", "RESPONSES"):
                out.append(("data", name, cls))
    return out


def test_every_version_matches_its_source_file() -> None:
    _specs_or_skip()
    old, new = _files(DEFAULT_SPEC_DIR), _files(DEFAULT_SPEC_4X_DIR)
    checked = {"3.9": 0, "4.x": 0}
    for kind, key, cls in _generated():
        o, n = old.get((kind, key)), new.get((kind, key))
        n_range = _range(n["validVersions"]) if n else None
        ranges = [r for r in (_range(o["validVersions"]) if o else None, n_range) if r]
        assert cls.VALID_VERSIONS == (min(r[0] for r in ranges), max(r[1] for r in ranges)), cls
        for v in range(cls.VALID_VERSIONS[0], cls.VALID_VERSIONS[1] + 1):
            src, label = (n, "4.x") if n_range and n_range[0] <= v <= n_range[1] else (o, "3.9")
            assert src is not None and _has(src["validVersions"], v), (cls, v)
            common = {s["name"]: s for s in src.get("commonStructs", [])}
            want = _spec_fields(src["fields"], common, v)
            assert _our_fields(cls, cls, v) == want, f"{cls.__name__} v{v} differs from {label}"
            checked[label] += 1
    assert checked["4.x"] > 600 and checked["3.9"] > 100, checked


def test_removed_apis_keep_their_3_9_versions() -> None:
    # Kafka 4 removed the ZooKeeper-mode inter-broker APIs; kbroker's cluster speaks them
    for key, valid in {4: (0, 7), 5: (0, 4), 6: (0, 8), 7: (0, 3)}.items():
        assert messages.REQUESTS[key].VALID_VERSIONS == valid == VALID_VERSIONS[key]
        assert messages.RESPONSES[key].VALID_VERSIONS == valid


def test_old_versions_still_generated_below_kip_896_bounds() -> None:
    # 4.x raised these lower bounds; the clients kbroker serves still send the old ones
    assert VALID_VERSIONS[0] == (0, 13)  # Produce: 4.x says 3-13
    assert VALID_VERSIONS[1] == (0, 18)  # Fetch: 4.x says 4-18
    assert VALID_VERSIONS[8] == (0, 10)  # OffsetCommit: 4.x says 2-10
    assert VALID_VERSIONS[19] == (0, 7)  # CreateTopics: 4.x says 2-7


def test_renamed_key_74_keeps_its_3_9_module() -> None:
    from kbroker.protocol.api_key import ApiKey
    from kbroker.protocol.messages import list_client_metrics_resources as old
    from kbroker.protocol.messages import list_config_resources as new

    assert old.ListClientMetricsResourcesRequest is new.ListConfigResourcesRequest
    assert ApiKey.LIST_CLIENT_METRICS_RESOURCES is ApiKey.LIST_CONFIG_RESOURCES
    assert VALID_VERSIONS[74] == (0, 1)


def test_unstable_versions_are_recorded() -> None:
    _specs_or_skip()
    expected: dict[object, set[int]] = {}
    new_files = _files(DEFAULT_SPEC_4X_DIR)
    for folder in (DEFAULT_SPEC_DIR, DEFAULT_SPEC_4X_DIR):
        for (kind, key), raw in _files(folder).items():
            valid = _range(raw["validVersions"])
            if kind == "request" and raw.get("latestVersionUnstable") and valid:
                new = new_files.get((kind, key)) if folder == DEFAULT_SPEC_DIR else None
                new_range = _range(new["validVersions"]) if new else None
                if new_range and new_range[0] <= valid[1] <= new_range[1]:
                    continue  # 4.x defines that version now, and 4.x's flag rules it
                expected.setdefault(key, set()).add(valid[1])
    assert {k: set(v) for k, v in UNSTABLE_VERSIONS.items()} == expected
    assert 6 in UNSTABLE_VERSIONS[22]  # InitProducerId v6 (KIP-939 2PC)
