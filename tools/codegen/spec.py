"""Load Kafka's JSON message specs (JSON with // comments) into a small model.

Spec language (see message-spec/README.md upstream): a message has "name", "type"
(request | response | header | data), "apiKey", "validVersions", "flexibleVersions",
"fields" and optional "commonStructs". A field has "name", "type" (a primitive,
"[]T", or a struct type name), "versions", and optionally "nullableVersions",
"taggedVersions" + "tag", "flexibleVersions" (per-field override), "default" and,
for structs, nested "fields".

Version ranges are kept as (lo, hi) tuples, inclusive; "N+" is (N, MAX_VERSION);
"none" is None. A message whose validVersions is "none" (an API Kafka 4 removed) loads
with ``valid = None``; merge.py keeps the 3.9 definition of such an API.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

MAX_VERSION = 0x7FFF

PRIMITIVES = frozenset(
    {
        "bool",
        "int8",
        "int16",
        "uint16",
        "int32",
        "uint32",
        "int64",
        "float64",
        "string",
        "bytes",
        "uuid",
        "records",
    }
)

Versions = tuple[int, int] | None

_COMMENT = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*')


def strip_comments(text: str) -> str:
    """Drop // comments that are outside JSON strings."""
    return _COMMENT.sub(lambda m: m.group(0) if m.group(0).startswith('"') else "", text)


def parse_versions(text: str | None) -> Versions:
    if text is None or text == "none":
        return None
    text = text.strip()
    if text.endswith("+"):
        return (int(text[:-1]), MAX_VERSION)
    if "-" in text:
        lo, hi = text.split("-")
        return (int(lo), int(hi))
    return (int(text), int(text))


def in_range(version: int, versions: Versions) -> bool:
    return versions is not None and versions[0] <= version <= versions[1]


def snake_case(name: str) -> str:
    """CamelCase JSON name -> snake_case attribute name.

    Rule: an underscore goes before every upper-case letter that follows a
    lower-case letter or a digit; then everything is lower-cased. A run of
    capitals therefore stays one word: "KRaftVersion" -> "kraft_version",
    "V3AndBelowTopics" -> "v3_and_below_topics", "TopicId" -> "topic_id".
    """
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


@dataclass
class Field:
    name: str  # JSON name (CamelCase)
    type: str  # "int32", "[]int32", "[]Foo", "Foo"
    versions: Versions
    nullable: Versions = None
    tagged: Versions = None
    tag: int | None = None
    flexible: Versions | str = "inherit"  # per-field override, or "inherit"
    default: str | None = None  # raw JSON default
    struct: Struct | None = None  # for struct and []struct fields

    @property
    def attr(self) -> str:
        name = snake_case(self.name)
        return name + "_" if name in _RESERVED else name

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type


_RESERVED = frozenset(
    {
        "and", "as", "assert", "async", "await", "break", "class", "continue", "def",
        "del", "elif", "else", "except", "finally", "for", "from", "global", "if",
        "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise",
        "return", "try", "while", "with", "yield", "encode", "decode", "version",
        "self", "cls",
    }
)  # fmt: skip


@dataclass
class Struct:
    name: str
    fields: list[Field]
    versions: Versions = None


@dataclass
class Message:
    name: str  # e.g. ProduceRequest
    kind: str  # request | response | header | data
    api_key: int | None
    valid: tuple[int, int]  # None only for a removed API (validVersions "none")
    flexible: Versions
    fields: list[Field]
    structs: list[Struct] = field(default_factory=list)  # leaf first
    path: str = ""
    unstable: bool = False  # "latestVersionUnstable": the highest valid version is not final
    # set by merge.py: version -> label of the spec folder its definition came from
    sources: dict[int, str] = field(default_factory=dict)
    unstable_versions: tuple[int, ...] = ()  # set by merge.py

    @property
    def top(self) -> Struct:
        return Struct(self.name, self.fields, self.valid)


def _union(a: Versions, b: Versions) -> Versions:
    if a is None or b is None:
        return a or b
    return (min(a[0], b[0]), max(a[1], b[1]))


def load(path: Path) -> Message:
    raw = json.loads(strip_comments(path.read_text()))
    valid = parse_versions(raw["validVersions"])
    msg = Message(
        name=raw["name"],
        kind=raw["type"],
        api_key=raw.get("apiKey"),
        valid=valid,  # type: ignore[arg-type]
        flexible=parse_versions(raw.get("flexibleVersions", "none")),
        fields=[],
        path=path.name,
        unstable=bool(raw.get("latestVersionUnstable", False)),
    )
    common: dict[str, dict] = {s["name"]: s for s in raw.get("commonStructs", [])}
    structs: dict[str, Struct] = {}

    def build_fields(specs: list[dict]) -> list[Field]:
        out = []
        for spec in specs:
            f = Field(
                name=spec["name"],
                type=spec["type"],
                versions=parse_versions(spec.get("versions")),
                nullable=parse_versions(spec.get("nullableVersions")),
                tagged=parse_versions(spec.get("taggedVersions")),
                tag=None if spec.get("tag") is None else int(spec["tag"]),
                flexible=(
                    parse_versions(spec["flexibleVersions"])
                    if "flexibleVersions" in spec
                    else "inherit"
                ),
                default=None if spec.get("default") is None else str(spec["default"]).strip(),
            )
            if f.tag is not None and f.tagged is None:
                f.tagged = f.versions
            etype = f.element_type
            if etype not in PRIMITIVES:
                if etype in structs:
                    f.struct = structs[etype]
                    f.struct.versions = _union(f.struct.versions, f.versions)
                elif "fields" in spec:
                    f.struct = Struct(etype, [], f.versions)
                    structs[etype] = f.struct
                    f.struct.fields = build_fields(spec["fields"])
                    msg.structs.append(f.struct)
                elif etype in common:
                    f.struct = Struct(etype, [], f.versions)
                    structs[etype] = f.struct
                    f.struct.fields = build_fields(common[etype]["fields"])
                    msg.structs.append(f.struct)
                else:
                    raise ValueError(f"{path.name}: unknown type {f.type}")
            out.append(f)
        return out

    msg.fields = build_fields(raw.get("fields", []))  # a removed API has none
    return msg


def load_dir(spec_dir: Path) -> list[Message]:
    return [load(p) for p in sorted(spec_dir.glob("*.json"))]
