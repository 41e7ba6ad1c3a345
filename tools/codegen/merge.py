"""Merge Kafka 3.9's and 4.x's definitions of each message into one.

Kafka 4 (KIP-896) raised many lower version bounds, but the clients kbroker serves
(kafka-python, aiokafka, librdkafka 2.0.2) still send the old versions, so each
message's versions are the union of its 3.9 and 4.x ranges. A version that 4.x
defines comes from the 4.x file; an older one from the 3.9 file. An API that 4.x
removed (validVersions "none": LeaderAndIsr, StopReplica, UpdateMetadata,
ControlledShutdown) keeps its 3.9 definition whole; an API new in 4.x (keys 88-94)
comes from 4.x alone. Request and response files pair by API key (key 74 was
renamed ListClientMetricsResources -> ListConfigResources; the 4.x name wins), other
files by name.

The check (``check_overlap``): for every version both folders define, the two
definitions must put the same fields on the wire in the same order, with the same
type, nullability, tagging, tag and flexible encoding; a field whose name changed
but whose wire form did not is a rename (the 4.x name wins). Anything else fails the
generation with a MergeError naming the message, the version and the field path.
The one exemption is a version 3.9 marked ``latestVersionUnstable``: it was never a
contract (the early-access share-group APIs), so 4.x's definition replaces it.

The merged Message is an ordinary spec.Message whose field version ranges cover
both sources, plus ``sources`` (version -> "3.9" | "4.x") and ``unstable_versions``
(the versions whose source marked them latestVersionUnstable). ``self_check``
re-flattens every version of the result against its source and fails on any
difference, so the merge cannot silently drift from the files.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .spec import MAX_VERSION, Field, Message, Struct, Versions, in_range

OLD = "3.9"
NEW = "4.x"


class MergeError(ValueError):
    """The 3.9 and 4.x definitions disagree, or cannot be expressed as one message."""


@dataclass(frozen=True)
class WireField:
    """One field of one version, as it goes on the wire (names aside)."""

    name: str
    type: str  # a primitive, "[]" + a primitive, or "struct" / "[]struct" (struct names are not wire)
    mode: str  # regular | tagged
    nullable: bool
    compact: bool
    tag: int | None
    default: str | None  # for tagged fields only: an omitted tagged field is its default
    children: tuple[WireField, ...] | None


def _field_flexible(f: Field, msg: Message, v: int) -> bool:
    if f.flexible == "inherit":
        return in_range(v, msg.flexible)
    return in_range(v, f.flexible)  # type: ignore[arg-type]


def wire_type(f: Field) -> str:
    if f.struct is None:
        return f.type
    return "[]struct" if f.is_array else "struct"


def flatten(fields: list[Field], msg: Message, v: int) -> tuple[WireField, ...]:
    """The fields of `msg` version `v`, in wire order, nested structs included."""
    out = []
    for f in fields:
        if not in_range(v, f.versions):
            continue
        tagged = in_range(v, f.tagged)
        out.append(
            WireField(
                name=f.name,
                type=wire_type(f),
                mode="tagged" if tagged else "regular",
                nullable=in_range(v, f.nullable),
                compact=tagged or _field_flexible(f, msg, v),
                tag=f.tag if tagged else None,
                default=f.default if tagged else None,
                children=None if f.struct is None else flatten(f.struct.fields, msg, v),
            )
        )
    return tuple(out)


def compare(a: tuple[WireField, ...], b: tuple[WireField, ...], path: str, names: bool) -> str | None:
    """The first difference between two flattened versions, or None.

    With names=False a field that differs only in its name is a rename, not a difference.
    """
    for i in range(max(len(a), len(b))):
        if i >= len(a) or i >= len(b):
            extra = (a if len(a) > len(b) else b)[i]
            side = OLD if len(a) > len(b) else NEW
            return f"{path}{extra.name}: only in {side}"
        x, y = a[i], b[i]
        if names and x.name != y.name:
            return f"{path}{x.name}: named {y.name} in {NEW}"
        plain = replace(x, name=y.name, children=None) != replace(y, children=None)
        if plain:
            return f"{path}{x.name}: {_describe(x)} in {OLD}, {_describe(y)} in {NEW}"
        if x.children is not None and y.children is not None:
            d = compare(x.children, y.children, f"{path}{y.name}.", names)
            if d:
                return d
    return None


def _describe(w: WireField) -> str:
    bits = [w.type, w.mode]
    if w.nullable:
        bits.append("nullable")
    if w.compact:
        bits.append("compact")
    if w.tag is not None:
        bits.append(f"tag {w.tag}")
    if w.default is not None:
        bits.append(f"default {w.default}")
    return " ".join(bits)


def _unstable(msg: Message, partner: Message | None) -> set[int]:
    """Versions of msg its spec marks unstable (a response takes its request's flag)."""
    flag = msg.unstable or (partner is not None and partner.unstable)
    return {msg.valid[1]} if flag and msg.valid is not None else set()


def check_overlap(old: Message, new: Message, old_unstable: set[int]) -> None:
    lo, hi = max(old.valid[0], new.valid[0]), min(old.valid[1], new.valid[1])
    for v in range(lo, hi + 1):
        if v in old_unstable:
            continue
        if in_range(v, old.flexible) != in_range(v, new.flexible):
            raise MergeError(f"{new.name} v{v}: flexible in one of {OLD}/{NEW} only")
        d = compare(flatten(old.fields, old, v), flatten(new.fields, new, v), "", names=False)
        if d:
            raise MergeError(f"{new.name} v{v}: {OLD} and {NEW} disagree: {d}")


class _Merger:
    def __init__(self, old: Message, new: Message, old_unstable: set[int]) -> None:
        self.old, self.new = old, new
        self.lo = min(old.valid[0], new.valid[0])
        self.hi = max(old.valid[1], new.valid[1])
        self.old_versions = [v for v in range(self.lo, self.hi + 1) if not in_range(v, new.valid)]
        for v in self.old_versions:
            if not in_range(v, old.valid):
                raise MergeError(f"{new.name}: v{v} is in neither {OLD} nor {NEW}")
        self.new_versions = list(range(new.valid[0], new.valid[1] + 1))
        self.structs: dict[str, Struct] = {}
        self.order: list[Struct] = []

    def _range(self, wanted: set[int], domain: set[int], what: str) -> Versions:
        """A version range that holds exactly the wanted versions of the domain."""
        if not wanted:
            return None
        top = max(wanted)
        r = (min(wanted), MAX_VERSION if top == self.hi else top)
        if any(in_range(v, r) != (v in wanted) for v in domain):
            raise MergeError(f"{self.new.name}: {what} is not one version range: {sorted(wanted)}")
        return r

    def _pairs(self, a: list[Field], b: list[Field]) -> list[tuple[Field | None, Field | None]]:
        """(3.9 field, 4.x field) pairs in merged order: 4.x's order, 3.9-only fields
        after the field that precedes them in 3.9. Unmatched names at the same index
        with the same wire type are a rename (a renamed struct type takes 4.x's name)."""
        by_name = {f.name: f for f in b}
        matched: dict[int, Field] = {}
        for i, fa in enumerate(a):
            if fa.name in by_name:
                matched[i] = by_name[fa.name]
        taken = {id(f) for f in matched.values()}
        for i, fa in enumerate(a):
            if i not in matched and i < len(b) and id(b[i]) not in taken and wire_type(b[i]) == wire_type(fa):
                if b[i].name not in {x.name for x in a}:
                    matched[i] = b[i]
                    taken.add(id(b[i]))
        out: list[tuple[Field | None, Field | None]] = [(None, fb) for fb in b]
        for i, fb in matched.items():
            j = next(k for k, (_, x) in enumerate(out) if x is fb)
            out[j] = (a[i], fb)
        for i, fa in enumerate(a):
            if i in matched:
                continue
            at = 0  # after the merged position of the 3.9 field before it
            for k in range(i - 1, -1, -1):
                pos = [j for j, (x, _) in enumerate(out) if x is a[k]]
                if pos:
                    at = pos[0] + 1
                    break
            out.insert(at, (fa, None))
        return out

    def fields(self, a: list[Field], b: list[Field], path: str) -> list[Field]:
        out = []
        for fa, fb in self._pairs(a, b):
            out.append(self.field(fa, fb, path))
        return out

    def field(self, fa: Field | None, fb: Field | None, path: str) -> Field:
        base = fb or fa
        assert base is not None
        name = f"{path}{base.name}"
        at: dict[int, tuple[Field, Message]] = {}
        for v in self.old_versions:
            if fa is not None and in_range(v, fa.versions):
                at[v] = (fa, self.old)
        for v in self.new_versions:
            if fb is not None and in_range(v, fb.versions):
                at[v] = (fb, self.new)
        everything = set(range(self.lo, self.hi + 1))
        present = set(at)
        merged = replace(base, struct=None)
        if not present:  # in no valid version of either source: keep it as the spec has it
            merged.versions = base.versions
        else:
            merged.versions = self._range(present, everything, f"{name} versions")
            merged.nullable = self._range(
                {v for v, (f, _) in at.items() if in_range(v, f.nullable)}, present, f"{name} nullable"
            )
            merged.tagged = self._range(
                {v for v, (f, _) in at.items() if in_range(v, f.tagged)}, present, f"{name} tagged"
            )
            tags = {f.tag for v, (f, _) in at.items() if in_range(v, f.tagged)}
            types = {wire_type(f) for f, _ in at.values()}
            if len(tags) > 1 or len(types) > 1:
                raise MergeError(f"{self.new.name}: {name} changes tag or type: {tags} {types}")
            merged.tag = tags.pop() if tags else base.tag
            if any(f.flexible != "inherit" for f, _ in at.values()):
                flex = {v for v, (f, m) in at.items() if _field_flexible(f, m, v)}
                merged.flexible = self._range(flex, present, f"{name} flexible")
        if base.struct is not None:
            merged.struct = self.struct(
                base.element_type,
                fa.struct if fa is not None else None,
                fb.struct if fb is not None else None,
                f"{name}.",
            )
            merged.struct.versions = _union(merged.struct.versions, merged.versions)
        return merged

    def struct(self, type_name: str, sa: Struct | None, sb: Struct | None, path: str) -> Struct:
        if type_name in self.structs:
            return self.structs[type_name]
        s = Struct(type_name, [], None)
        self.structs[type_name] = s
        s.fields = self.fields(sa.fields if sa else [], sb.fields if sb else [], path)
        self.order.append(s)  # after its children: leaf first, as spec.load orders them
        return s

    def message(self) -> Message:
        old, new = self.old, self.new
        everything = set(range(self.lo, self.hi + 1))
        flex = {v for v in self.old_versions if in_range(v, old.flexible)}
        flex |= {v for v in self.new_versions if in_range(v, new.flexible)}
        msg = Message(
            name=new.name,
            kind=new.kind,
            api_key=new.api_key,
            valid=(self.lo, self.hi),
            flexible=self._range(flex, everything, "flexibleVersions"),
            fields=self.fields(old.fields, new.fields, ""),
            path=_paths(old, new),
        )
        msg.structs = self.order
        msg.sources = {v: OLD for v in self.old_versions} | {v: NEW for v in self.new_versions}
        return msg


def _union(a: Versions, b: Versions) -> Versions:
    if a is None or b is None:
        return a or b
    return (min(a[0], b[0]), max(a[1], b[1]))


def _paths(old: Message, new: Message) -> str:
    lo = new.valid[0]
    if old.valid[0] >= lo:
        return f"{new.path} ({NEW})"
    return f"{new.path} ({NEW}: v{lo}-{new.valid[1]}), {old.path} ({OLD}: v{old.valid[0]}-{lo - 1})"


def self_check(merged: Message, old: Message | None, new: Message | None) -> None:
    """Every version of the merged message flattens exactly as its source does."""
    for v, label in merged.sources.items():
        src = new if label == NEW else old
        assert src is not None
        if in_range(v, merged.flexible) != in_range(v, src.flexible):
            raise MergeError(f"{merged.name} v{v}: merged flexibility differs from {label}")
        d = compare(
            flatten(src.fields, src, v), flatten(merged.fields, merged, v), "", names=label == NEW
        )
        if d:
            raise MergeError(f"{merged.name} v{v}: merged code differs from {label}: {d}")


def _key(m: Message) -> tuple[str, object]:
    return (m.kind, m.api_key) if m.kind in ("request", "response") else (m.kind, m.name)


def merge_all(old_msgs: list[Message], new_msgs: list[Message]) -> list[Message]:
    """One Message per request/response/header/data, merged as the module docstring says."""
    old_by = {_key(m): m for m in old_msgs}
    new_by = {_key(m): m for m in new_msgs}
    partner = {}
    for by in (old_by, new_by):
        for (kind, key), m in by.items():
            if kind == "response":
                partner[id(m)] = by.get(("request", key))
    out = []
    for k in sorted(set(old_by) | set(new_by), key=str):
        old, new = old_by.get(k), new_by.get(k)
        if new is not None and new.valid is None:  # removed in Kafka 4: keep 3.9's
            new = None
        if old is not None and new is None:
            merged = old
            merged.sources = {v: OLD for v in range(old.valid[0], old.valid[1] + 1)}
            merged.unstable_versions = tuple(sorted(_unstable(old, partner.get(id(old)))))
        elif new is not None and old is None:
            merged = new
            merged.path = f"{new.path} ({NEW})"
            merged.sources = {v: NEW for v in range(new.valid[0], new.valid[1] + 1)}
            merged.unstable_versions = tuple(sorted(_unstable(new, partner.get(id(new)))))
        else:
            assert old is not None and new is not None
            old_unstable = _unstable(old, partner.get(id(old)))
            check_overlap(old, new, old_unstable)
            merged = _Merger(old, new, old_unstable).message()
            new_unstable = _unstable(new, partner.get(id(new)))
            unstable = {v for v, label in merged.sources.items() if label == OLD and v in old_unstable}
            merged.unstable_versions = tuple(sorted(unstable | new_unstable))
        self_check(merged, old, new)
        out.append(merged)
    return out
