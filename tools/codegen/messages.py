"""Generate kbroker/protocol/messages/*.py: one module per API, plus headers and data.

Each struct (the message itself and every nested or common struct) becomes a class
with __slots__, a keyword-only __init__ holding the spec defaults, a FIELDS table,
``decode(cls, r, version)`` and ``encode(self, w, version)``. Nested structs are
nested classes of the message class, one level deep (as in Kafka's Java generator):
``ProduceRequest.TopicProduceData``, ``ProduceRequest.PartitionProduceData``.

decode/encode are straight-line code: per field, the versions of the struct's range
are split into runs with the same encoding (absent, regular or tagged; nullable or
not; compact or classic) and each run becomes one ``if version ...`` branch.
"""

from __future__ import annotations

from dataclasses import dataclass

from .enums import HEADER
from .spec import Field, Message, Struct, Versions, in_range, snake_case

INDENT = "    "

_FIXED = {"int8", "int16", "uint16", "int32", "uint32", "int64", "float64"}

_VARIABLE = {"string", "bytes", "records"}  # encoded differently in flexible versions

_PY_TYPE = {
    "bool": "bool",
    "int8": "int",
    "int16": "int",
    "uint16": "int",
    "int32": "int",
    "uint32": "int",
    "int64": "int",
    "float64": "float",
    "string": "str",
    "bytes": "bytes",
    "uuid": "uuid.UUID",
    "records": "Records",
}


def module_name(msg: Message) -> str:
    if msg.kind in ("request", "response"):
        return snake_case(msg.name.removesuffix("Request").removesuffix("Response"))
    return snake_case(msg.name)


@dataclass(frozen=True)
class Encoding:
    mode: str  # "absent" | "regular" | "tagged"
    nullable: bool = False
    compact: bool = False


@dataclass
class Ctx:
    msg: Message
    lo: int  # the version range this struct's code must handle
    hi: int

    def qual(self, struct_name: str) -> str:
        return f"{self.msg.name}.{struct_name}"

    def flexible(self, version: int) -> bool:
        return in_range(version, self.msg.flexible)


def cond(lo: int, hi: int, rlo: int, rhi: int) -> str:
    """A condition on `version` selecting [lo, hi] within [rlo, rhi]; "" = always."""
    lo_open = lo <= rlo
    hi_open = hi >= rhi
    if lo_open and hi_open:
        return ""
    if lo_open:
        return f"version <= {hi}"
    if hi_open:
        return f"version >= {lo}"
    if lo == hi:
        return f"version == {lo}"
    return f"{lo} <= version <= {hi}"


def encoding(f: Field, v: int, ctx: Ctx) -> Encoding:
    if not in_range(v, f.versions):
        return Encoding("absent")
    nullable = in_range(v, f.nullable)
    if in_range(v, f.tagged):
        return Encoding("tagged", nullable, True)
    if not f.is_array and f.type not in _VARIABLE:
        return Encoding("regular", nullable, False)  # same bytes in flexible versions
    flex = ctx.flexible(v) if f.flexible == "inherit" else in_range(v, f.flexible)  # type: ignore[arg-type]
    return Encoding("regular", nullable, flex)


def runs(f: Field, ctx: Ctx) -> list[tuple[int, int, Encoding]]:
    """Maximal runs of versions in [ctx.lo, ctx.hi] with the same encoding."""
    out: list[tuple[int, int, Encoding]] = []
    for v in range(ctx.lo, ctx.hi + 1):
        e = encoding(f, v, ctx)
        if out and out[-1][2] == e:
            out[-1] = (out[-1][0], v, e)
        else:
            out.append((v, v, e))
    return out


def branches(f: Field, ctx: Ctx) -> list[tuple[str, Encoding]]:
    """(condition, encoding) for the regular runs, highest versions first, for an
    if/elif chain: a run whose higher versions are all handled by earlier branches
    only needs a lower bound."""
    out = []
    handled_above = True
    for lo, hi, e in reversed(runs(f, ctx)):
        if e.mode == "regular":
            out.append((cond(lo, ctx.hi if handled_above else hi, ctx.lo, ctx.hi), e))
        else:
            handled_above = False
    return out


# ---------------------------------------------------------------- expressions


def default_expr(f: Field, ctx: Ctx) -> str:
    """The spec default of a field, as a Python expression (fresh for lists/structs)."""
    d = f.default
    if d == "null":
        return "None"
    t = f.type
    if f.is_array:
        return "[]"
    if f.struct is not None:
        return f"{ctx.qual(f.struct.name)}()"
    if t == "bool":
        return "True" if d is not None and d.lower() == "true" else "False"
    if t in _FIXED:
        if d is None or d == "":
            return "0.0" if t == "float64" else "0"
        if t == "float64":
            return repr(float(d))
        try:
            return str(int(d, 0))
        except ValueError:
            return str(int(d))
    if t == "string":
        return repr(d or "")
    if t == "bytes":
        return 'b""'
    if t == "uuid":
        return "ZERO_UUID"
    if t == "records":
        return "None"
    raise ValueError(f"{ctx.msg.name}.{f.name}: no default for {t}")


def py_type(f: Field, ctx: Ctx) -> str:
    et = f.element_type
    base = _PY_TYPE.get(et) or ctx.qual(et)
    ann = f"list[{base}]" if f.is_array else base
    if f.nullable is not None or f.default == "null" or f.type == "records":
        ann += " | None"
    return ann


def elem_read(t: str, e: Encoding, ctx: Ctx, nullable: bool) -> str:
    c = "compact_" if e.compact else ""
    n = "nullable_" if nullable else ""
    if t == "bool":
        return "r.boolean()"
    if t in _FIXED or t == "uuid":
        return f"r.{t}()"
    if t in ("string", "bytes"):
        return f"r.{c}{n}{t}()"
    if t == "records":
        return f"r.{c}records()"
    dec = f"{ctx.qual(t)}.decode(r, version)"
    return f"(None if r.int8() < 0 else {dec})" if nullable else dec


def read_expr(f: Field, e: Encoding, ctx: Ctx) -> str:
    if not f.is_array:
        return elem_read(f.type, e, ctx, e.nullable)
    elem = elem_read(f.element_type, e, ctx, False)
    c = "compact_" if e.compact else ""
    if e.nullable:
        return f"None if (_n := r.{c}array_length()) < 0 else [{elem} for _ in range(_n)]"
    return f"[{elem} for _ in range(r.{c}array_count())]"


def elem_write(t: str, v: str, e: Encoding, nullable: bool) -> list[str]:
    c = "compact_" if e.compact else ""
    n = "nullable_" if nullable else ""
    if t == "bool":
        return [f"w.boolean({v})"]
    if t in _FIXED or t == "uuid":
        return [f"w.{t}({v})"]
    if t in ("string", "bytes"):
        return [f"w.{c}{n}{t}({v})"]
    if t == "records":
        return [f"w.{c}records({v})"]
    if nullable:
        return [
            f"if {v} is None:",
            f"{INDENT}w.int8(-1)",
            "else:",
            f"{INDENT}w.int8(1)",
            f"{INDENT}{v}.encode(w, version)",
        ]
    return [f"{v}.encode(w, version)"]


def write_stmts(f: Field, v: str, e: Encoding) -> list[str]:
    if not f.is_array:
        return elem_write(f.type, v, e, e.nullable)
    c = "compact_" if e.compact else ""
    elem = f"_{v.removeprefix('self.')}_elem"
    body = [f"w.{c}array_length(len({v}))", f"for {elem} in {v}:"]
    body += [INDENT + s for s in elem_write(f.element_type, elem, e, False)]
    if e.nullable:
        return [f"if {v} is None:", f"{INDENT}w.{c}array_length(-1)", "else:"] + [
            INDENT + s for s in body
        ]
    return body


def indent(lines: list[str], n: int = 1) -> list[str]:
    return [INDENT * n + s if s else s for s in lines]


def if_chain(arms: list[tuple[str, list[str]]], otherwise: list[str] | None) -> list[str]:
    """if/elif/else over (condition, body) arms; "" as the first condition = no if."""
    if arms and arms[0][0] == "":
        return arms[0][1]
    out: list[str] = []
    for i, (c, body) in enumerate(arms):
        if c == "":
            out.append("else:")
            out += indent(body)
            return out
        out.append(f"{'if' if i == 0 else 'elif'} {c}:")
        out += indent(body)
    if otherwise:
        if not out:
            return otherwise
        out.append("else:")
        out += indent(otherwise)
    return out


# ---------------------------------------------------------------- classes


def tagged_fields(s: Struct, ctx: Ctx) -> list[Field]:
    tagged = [
        f
        for f in s.fields
        if any(encoding(f, v, ctx).mode == "tagged" for v in range(ctx.lo, ctx.hi + 1))
    ]
    return sorted(tagged, key=lambda f: f.tag or 0)


def flex_cond(ctx: Ctx) -> str | None:
    """Condition for the tagged-fields block; None if this struct is never flexible."""
    if ctx.msg.flexible is None:
        return None
    lo = max(ctx.msg.flexible[0], ctx.lo)
    if lo > ctx.hi:
        return None
    return cond(lo, ctx.hi, ctx.lo, ctx.hi)


def _tagged_versions(f: Field, ctx: Ctx) -> list[int]:
    return [v for v in range(ctx.lo, ctx.hi + 1) if encoding(f, v, ctx).mode == "tagged"]


def tagged_cond(f: Field, ctx: Ctx) -> str:
    """Condition, inside the tagged-fields block, for the versions where f is tagged."""
    vs = _tagged_versions(f, ctx)
    assert vs == list(range(vs[0], vs[-1] + 1)), f"{ctx.msg.name}.{f.name}: tagged gap"
    assert ctx.msg.flexible is not None
    return cond(vs[0], vs[-1], max(ctx.lo, ctx.msg.flexible[0]), ctx.hi)


def tagged_encoding(f: Field, ctx: Ctx) -> Encoding:
    encs = {encoding(f, v, ctx) for v in _tagged_versions(f, ctx)}
    assert len(encs) == 1, f"{ctx.msg.name}.{f.name}: tagged encoding varies by version"
    return encs.pop()


def render_decode(s: Struct, ctx: Ctx, cls_name: str, top: bool) -> list[str]:
    out = ["@classmethod", f"def decode(cls, r: Reader, version: int) -> {cls_name}:"]
    body: list[str] = []
    if top:
        body += [
            f"if not {ctx.lo} <= version <= {ctx.hi}:",
            f'{INDENT}raise DecodeError(f"{ctx.msg.name} version {{version}} is not in {ctx.lo}-{ctx.hi}")',
        ]
    body.append("self = cls.__new__(cls)")
    for f in s.fields:
        target = f"self.{f.attr}"
        arms = [(c, [f"{target} = {read_expr(f, e, ctx)}"]) for c, e in branches(f, ctx)]
        body += if_chain(arms, [f"{target} = {default_expr(f, ctx)}"])
    fc = flex_cond(ctx)
    if fc is not None:
        tagged = tagged_fields(s, ctx)
        if not tagged:
            block = ["r.skip_tagged_fields()"]
        else:
            block = ["for _tag, _size in r.tagged_fields():", f"{INDENT}_end = r.pos + _size"]
            arms = []
            for f in tagged:
                tc = tagged_cond(f, ctx)
                c = f"_tag == {f.tag}" + (f" and {tc}" if tc else "")
                e = tagged_encoding(f, ctx)
                arms.append((c, [f"self.{f.attr} = {read_expr(f, e, ctx)}"]))
            chain = if_chain(arms, ["r.skip(_size)", "continue"])
            block += indent(chain)
            block.append(f"{INDENT}r.end_tagged_field(_end)")
        body += if_chain([(fc, block)], None)
    body.append("return self")
    return out + indent(body)


def render_encode(s: Struct, ctx: Ctx, top: bool) -> list[str]:
    out = ["def encode(self, w: Writer, version: int) -> None:"]
    body: list[str] = []
    if top:
        body += [
            f"if not {ctx.lo} <= version <= {ctx.hi}:",
            f'{INDENT}raise ValueError(f"{ctx.msg.name} version {{version}} is not in {ctx.lo}-{ctx.hi}")',
        ]
    for f in s.fields:
        arms = []
        for c, e in branches(f, ctx):
            stmts = write_stmts(f, f"self.{f.attr}", e)
            if not e.nullable and f.type != "records" and py_type(f, ctx).endswith("| None"):
                where = f"{ctx.msg.name}.{f.attr}" if top else f"{ctx.qual(s.name)}.{f.attr}"
                stmts = [
                    f"if self.{f.attr} is None:",
                    f'{INDENT}raise ValueError(f"{where} is not nullable in version {{version}}")',
                ] + stmts
            arms.append((c, stmts))
        body += if_chain(arms, None)
    fc = flex_cond(ctx)
    if fc is not None:
        tagged = tagged_fields(s, ctx)
        if not tagged:
            block = ["w.empty_tagged_fields()"]
        else:
            conds = []
            for f in tagged:
                tc = tagged_cond(f, ctx)
                d = default_expr(f, ctx)
                if d == "None":
                    nd = f"self.{f.attr} is not None"
                elif f.struct is not None and not f.is_array:
                    nd = f"(self.{f.attr} is None or not self.{f.attr}._is_default())"
                else:
                    nd = f"self.{f.attr} != {d}"
                conds.append((f, f"{tc} and {nd}" if tc else nd))
            block = ["_count = 0"]
            for _, c in conds:
                block += [f"if {c}:", f"{INDENT}_count += 1"]
            block.append("w.uvarint(_count)")
            for f, c in conds:
                e = tagged_encoding(f, ctx)
                inner = ["_t = Writer()"]
                inner += _retarget(write_stmts(f, f"self.{f.attr}", e), "_t")
                inner += [f"w.uvarint({f.tag})", "w.uvarint(len(_t))", "w.extend(_t)"]
                block += [f"if {c}:"] + indent(inner)
        body += if_chain([(fc, block)], None)
    if not body:
        body = ["pass"]
    return out + indent(body)


def _retarget(lines: list[str], writer: str) -> list[str]:
    """Rewrite statements that write to `w` so they write to another Writer."""
    out = []
    for line in lines:
        stripped = line.lstrip()
        pad = line[: len(line) - len(stripped)]
        stripped = stripped.replace("(w, version)", f"({writer}, version)")
        if stripped.startswith("w."):
            stripped = writer + stripped[1:]
        out.append(pad + stripped)
    return out


def _spec_versions(v: Versions) -> str:
    return "None" if v is None else f"({v[0]}, {v[1]})"


def render_fields_table(s: Struct) -> list[str]:
    if not s.fields:
        return ["FIELDS = ()"]
    out = ["FIELDS = ("]
    for f in s.fields:
        args = [f'"{f.attr}"', f'"{f.type}"', _spec_versions(f.versions)]
        if f.nullable is not None or f.tagged is not None:
            args.append(_spec_versions(f.nullable))
        if f.tagged is not None:
            args += [_spec_versions(f.tagged), str(f.tag)]
        out.append(f"{INDENT}FieldSpec({', '.join(args)}),")
    out.append(")")
    return out


def render_init(s: Struct, ctx: Ctx) -> list[str]:
    if not s.fields:
        return ["def __init__(self) -> None:", f"{INDENT}pass"]
    out = ["def __init__(", f"{INDENT}self,", f"{INDENT}*,"]
    body = []
    for f in s.fields:
        d = default_expr(f, ctx)
        fresh = d == "[]" or d.endswith("()")
        out.append(f"{INDENT}{f.attr}: {py_type(f, ctx)} = {'UNSET' if fresh else d},")
        if fresh:
            body.append(f"self.{f.attr} = {d} if {f.attr} is UNSET else {f.attr}")
        else:
            body.append(f"self.{f.attr} = {f.attr}")
    out.append(") -> None:")
    return out + indent(body)


def render_class(s: Struct, ctx: Ctx, top: bool, doc: str) -> list[str]:
    cls_name = ctx.msg.name if top else ctx.qual(s.name)
    out = [f"class {s.name}(Struct):", f'{INDENT}"""{doc}"""', ""]
    body: list[str] = []
    slots = ", ".join(f'"{f.attr}"' for f in s.fields)
    body.append(f"__slots__ = ({slots}{',' if len(s.fields) == 1 else ''})")
    if top:
        if ctx.msg.api_key is not None:
            body.append(f"API_KEY = {ctx.msg.api_key}")
        body.append(f"VALID_VERSIONS = ({ctx.msg.valid[0]}, {ctx.msg.valid[1]})")
        first_flex = ctx.msg.flexible[0] if ctx.msg.flexible else None
        body.append(f"FLEXIBLE_VERSION = {first_flex}")
    body.append("")
    if top:
        for nested in ctx.msg.structs:
            nctx = struct_ctx(nested, ctx.msg)
            body += render_class(nested, nctx, False, f"{ctx.msg.name}.{nested.name}")
            body.append("")
    body += render_fields_table(s)
    body.append("")
    body += render_init(s, ctx)
    body.append("")
    body += render_decode(s, ctx, cls_name, top)
    body.append("")
    body += render_encode(s, ctx, top)
    return out + indent(body)


def struct_ctx(s: Struct, msg: Message) -> Ctx:
    lo, hi = msg.valid
    if s.versions is not None:
        lo, hi = max(lo, s.versions[0]), min(hi, s.versions[1])
    if lo > hi:  # a struct used in no valid version: generate for the full range
        lo, hi = msg.valid
    return Ctx(msg, lo, hi)


def render_module(name: str, msgs: list[Message]) -> str:
    msgs = sorted(msgs, key=lambda m: (m.kind != "request", m.name))
    m0 = msgs[0]
    title = ", ".join(m.name for m in msgs)
    vr = f"versions {m0.valid[0]}-{m0.valid[1]}"
    if m0.api_key is not None:
        doc = f"{title} (API key {m0.api_key}), {vr}."
    else:
        doc = f"{title}, {vr}."
    lines = [
        HEADER.rstrip("\n"),
        f'"""{doc}',
        "",
        "Source: " + ", ".join(m.path for m in msgs) + ".",
        '"""',
        "",
        "from __future__ import annotations",
        "",
    ]
    body: list[str] = []
    for m in msgs:
        ctx = Ctx(m, m.valid[0], m.valid[1])
        body += ["", ""]
        role = f"{m.kind} of API key {m.api_key}" if m.api_key is not None else m.kind
        body += render_class(m.top, ctx, True, f"{m.name}, {role}.")
    text = "\n".join(body)
    if "uuid." in text:
        lines += ["import uuid", ""]
    codec = [n for n in ("ZERO_UUID", "DecodeError", "Reader", "Writer") if n in text]
    schema = [n for n in ("UNSET", "FieldSpec", "Records", "Struct") if n in text]
    lines.append(f"from kbroker.protocol.codec import {', '.join(codec)}")
    lines.append(f"from kbroker.protocol.schema import {', '.join(schema)}")
    lines += ["", "__all__ = [" + ", ".join(f'"{m.name}"' for m in msgs) + "]"]
    lines += body
    return "\n".join(line.rstrip() for line in lines) + "\n"


def render_init_module(msgs: list[Message]) -> str:
    lines = [
        HEADER.rstrip("\n"),
        '"""Every generated message class; REQUESTS and RESPONSES by API key."""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import Any",
        "",
    ]
    by_module: dict[str, list[str]] = {}
    for m in msgs:
        by_module.setdefault(module_name(m), []).append(m.name)
    for mod in sorted(by_module):
        names = ", ".join(sorted(by_module[mod]))
        lines.append(f"from kbroker.protocol.messages.{mod} import {names}")
    lines += ["", "REQUESTS: dict[int, type[Any]] = {"]
    for m in sorted((m for m in msgs if m.kind == "request"), key=lambda m: m.api_key or 0):
        lines.append(f"    {m.api_key}: {m.name},")
    lines += ["}", "", "RESPONSES: dict[int, type[Any]] = {"]
    for m in sorted((m for m in msgs if m.kind == "response"), key=lambda m: m.api_key or 0):
        lines.append(f"    {m.api_key}: {m.name},")
    lines += ["}", "", "__all__ = ["]
    lines += [f'    "{n}",' for n in sorted(["REQUESTS", "RESPONSES"] + [m.name for m in msgs])]
    lines += ["]"]
    return "\n".join(lines) + "\n"


def render_messages(messages: list[Message]) -> dict[str, str]:
    by_module: dict[str, list[Message]] = {}
    for m in messages:
        by_module.setdefault(module_name(m), []).append(m)
    files = {f"messages/{mod}.py": render_module(mod, ms) for mod, ms in by_module.items()}
    files["messages/__init__.py"] = render_init_module(messages)
    for old_mod, new_mod, names in RENAMED_MODULES:
        files[f"messages/{old_mod}.py"] = render_alias_module(old_mod, new_mod, names)
    return files


# A module kept under an API's old name: (old module, new module, (old class, new class)...).
RENAMED_MODULES = (
    (
        "list_client_metrics_resources",
        "list_config_resources",
        (
            ("ListClientMetricsResourcesRequest", "ListConfigResourcesRequest"),
            ("ListClientMetricsResourcesResponse", "ListConfigResourcesResponse"),
        ),
    ),
)


def render_alias_module(old_mod: str, new_mod: str, names: tuple[tuple[str, str], ...]) -> str:
    imports = ", ".join(f"{new} as {old}" for old, new in names)
    lines = [
        HEADER.rstrip("\n"),
        f'"""{old_mod}: the Kafka 3.9 name of {new_mod} (API key renamed in Kafka 4.1, KIP-1142)."""',
        "",
        "from __future__ import annotations",
        "",
        f"from kbroker.protocol.messages.{new_mod} import {imports}",
        "",
        "__all__ = [" + ", ".join(f'"{old}"' for old, _ in names) + "]",
    ]
    return "\n".join(lines) + "\n"


def render_internal_records(records: list[Message]) -> dict[str, str]:
    """internal-records/*.json (coordinator record keys and values) as a subpackage."""
    files = {
        f"messages/internal_records/{module_name(m)}.py": render_module(module_name(m), [m])
        for m in records
    }
    lines = [
        HEADER.rstrip("\n"),
        '"""Record key/value formats of __consumer_offsets and __transaction_state."""',
        "",
        "from __future__ import annotations",
        "",
    ]
    for m in sorted(records, key=lambda m: m.name):
        lines.append(
            f"from kbroker.protocol.messages.internal_records.{module_name(m)} import {m.name}"
        )
    lines += (
        ["", "__all__ = ["]
        + [f'    "{m.name}",' for m in sorted(records, key=lambda m: m.name)]
        + ["]"]
    )
    files["messages/internal_records/__init__.py"] = "\n".join(lines) + "\n"
    return files
