"""The packages stand in layers: each imports only from the layers below it.

    0  kbroker.common                                  value types: ErrorCode, KafkaError, TopicPartition
    1  kbroker._core                                   compiled core: bytes, CRCs, indexes
    2  kbroker.records, kbroker.protocol, kbroker.utils formats and helpers over the core
    3  kbroker.client, kbroker.storage
    4  kbroker.spark, kbroker.config, kbroker.coordinator, kbroker.metadata, kbroker.cluster,
       kbroker.security, kbroker.telemetry
       (these may import one another and layer 3; never the serving layer)
    5  kbroker.server                                  the request handlers and their services
    6  kbroker.ops                                     the operations listener and console
       (neither imports the wiring, kbroker.broker or kbroker.broker_components: the
       import circle through broker.py, server/ and ops/ is gone)
    -  the wiring and entry points: kbroker.broker (lifecycle), kbroker.broker_components
       (the collaborators, built), kbroker.cli, ...

Handlers reach cluster mode only through their services' support object
(server/metadata_support.py): no module under kbroker/server/apis/ names `clustered`
or `zk_broker`.

Run-time imports (module level and inside functions, not under TYPE_CHECKING) make no
cycle among kbroker's modules: at 3eb551c one ran through broker.py, ops/listener.py and
ops/health.py, another through server/api_table.py and its ApiVersions handler; the
last, server/forwarding.py and request_dispatcher.py, ended with server/request_frame.py.

For the layers every import counts: at module level, inside functions, under TYPE_CHECKING, and the
`import` / `cimport` lines of .pyx and .pxd files (a core module importing upwards at
run time is still an upward import; it was how _core/batch_decode.pyx and
records/recompress.py made a cycle).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kbroker"

# package -> the packages it may import (besides itself)
_LOW = ("kbroker.common",)
_CORE = (*_LOW, "kbroker._core")
_FORMATS = (*_CORE, "kbroker.records", "kbroker.protocol", "kbroker.utils")
_MIDDLE = (*_FORMATS, "kbroker.client", "kbroker.storage")
_UPPER = (*_MIDDLE, "kbroker.spark", "kbroker.config", "kbroker.coordinator", "kbroker.metadata",
          "kbroker.cluster", "kbroker.security", "kbroker.telemetry")
ALLOWED: dict[str, tuple[str, ...]] = {
    "kbroker.common": (),
    "kbroker._core": _LOW,
    "kbroker.records": _CORE,
    "kbroker.protocol": _CORE,
    "kbroker.utils": _CORE,
    "kbroker.client": _FORMATS,
    "kbroker.storage": _FORMATS,
    "kbroker.spark": _UPPER,
    "kbroker.config": _UPPER,
    "kbroker.coordinator": _UPPER,
    "kbroker.metadata": _UPPER,
    "kbroker.cluster": _UPPER,
    "kbroker.security": _UPPER,
    "kbroker.telemetry": _UPPER,
    "kbroker.server": _UPPER,
    "kbroker.ops": (*_UPPER, "kbroker.server"),
}

_CYTHON_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+c?import\b|c?import\s+([\w.]+))", re.M)


def package_of(module: str) -> str:
    """kbroker.storage.log -> kbroker.storage; kbroker.cli -> kbroker.cli."""
    return ".".join(module.split(".")[:2])


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, module: str, *, type_checking: bool = True) -> set[str]:
    """Every absolute module name that `path` imports (relative imports resolved);
    type_checking=False leaves out what `if TYPE_CHECKING:` imports."""
    text = path.read_text()
    if path.suffix in (".pyx", ".pxd"):
        return {a or b for a, b in _CYTHON_IMPORT.findall(text)}
    tree = ast.parse(text)
    skipped = set()
    if not type_checking:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and (
                    (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
                    or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")):
                skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (path.name == "__init__.py")]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.add(name)
            found |= {f"{name}.{alias.name}" for alias in node.names}
    return found


def upward_imports(root: Path) -> list[str]:
    """`importer -> imported` for every import a layer does not allow."""
    bad = []
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".pyx", ".pxd")):
        module = module_name(path, root)
        own = package_of(module)
        allowed = ALLOWED.get(own)
        if allowed is None:
            continue  # the serving layer and entry points may import anything
        for imported in sorted(imported_modules(path, module)):
            if imported.split(".")[0] != "kbroker" or imported in ("kbroker", "kbroker.__version__"):
                continue  # the top package itself imports nothing on import (kbroker/__init__.py)
            target = package_of(imported)
            if target != own and target not in allowed:
                bad.append(f"{module} -> {imported}")
    return bad


def test_no_package_imports_upwards() -> None:
    assert upward_imports(PACKAGE) == []


MODE_NAMES = frozenset({"clustered", "zk_broker"})


def mode_names(root: Path) -> list[str]:
    """`module:line name` for each `clustered` / `zk_broker` identifier in a handler."""
    found = []
    for path in sorted((root / "server" / "apis").glob("*.py")):
        tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
        found += [f"{module_name(path, root)}:{t.start[0]} {t.string}" for t in tokens
                  if t.type == tokenize.NAME and t.string in MODE_NAMES]
    return found


def test_handlers_reach_cluster_mode_only_through_the_support_object() -> None:
    assert mode_names(PACKAGE) == []


def test_the_check_finds_a_handler_asking_for_the_mode(tmp_path: Path) -> None:
    root = tmp_path / "kbroker"
    (root / "server" / "apis").mkdir(parents=True)
    (root / "server" / "apis" / "h.py").write_text(
        '"""clustered in a docstring is prose."""\n'
        "def handle(ctx):\n    return ctx.services.clustered or ctx.zk_broker\n")
    assert mode_names(root) == ["kbroker.server.apis.h:3 clustered",
                                "kbroker.server.apis.h:3 zk_broker"]


def test_the_check_finds_an_upward_import(tmp_path: Path) -> None:
    root = tmp_path / "kbroker"
    for rel, text in {
        "_core/__init__.py": "",
        "_core/records.pyx": "from kbroker._core.crc32c cimport crc32c_update\n"
                             "from kbroker.protocol.api_key import ApiKey\n",
        "records/__init__.py": "",
        "records/recompress.py": "def f():\n    from ..storage import log\n",
        "common/__init__.py": "from typing import TYPE_CHECKING\n"
                              "if TYPE_CHECKING:\n    import kbroker.client\n",
        "server/__init__.py": "",
        "server/handler.py": "from typing import TYPE_CHECKING\n"
                             "if TYPE_CHECKING:\n    from kbroker.broker import Broker\n",
        "server/apis/h.py": "def f():\n    from kbroker import broker\n",
        "ops/console.py": "from kbroker.broker_components import BrokerComponents\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    assert upward_imports(root) == [
        "kbroker._core.records -> kbroker.protocol.api_key",
        "kbroker.common -> kbroker.client",
        "kbroker.ops.console -> kbroker.broker_components",
        "kbroker.ops.console -> kbroker.broker_components.BrokerComponents",
        "kbroker.records.recompress -> kbroker.storage",
        "kbroker.records.recompress -> kbroker.storage.log",
        "kbroker.server.apis.h -> kbroker.broker",
        "kbroker.server.handler -> kbroker.broker",
        "kbroker.server.handler -> kbroker.broker.Broker",
    ]


# Run-time imports make no cycle: every module can be imported first. (A cycle closed only
# by TYPE_CHECKING imports is a cycle of annotations, not of loading; it is allowed.)


def import_cycles(root: Path) -> list[list[str]]:
    """The strongly connected components (of two modules or more) of the run-time import
    graph of the .py modules under `root`, largest first."""
    paths = {module_name(p, root): p for p in root.rglob("*.py")}
    top = root.name

    def resolve(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name if name and name != top else None

    graph = {m: {t for n in imported_modules(p, m, type_checking=False) if n.split(".")[0] == top
                 and (t := resolve(n)) is not None and t != m} for m, p in paths.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def strong(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                out.append(sorted([v, *component]))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return sorted(out, key=len, reverse=True)


def test_no_run_time_import_cycle() -> None:
    assert import_cycles(PACKAGE) == []


def test_the_check_finds_an_import_cycle(tmp_path: Path) -> None:
    root = tmp_path / "kbroker"
    (root / "server").mkdir(parents=True)
    for rel, text in {
        "__init__.py": "",
        "server/__init__.py": "",
        "server/a.py": "from kbroker.server.b import f\n",
        "server/b.py": "def f():\n    from kbroker.server import c\n",
        "server/c.py": "from kbroker.server.a import g\n",
        "server/d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kbroker.server import a\n",
        "server/e.py": "from kbroker.server import d\n",
    }.items():
        (root / rel).write_text(text)
    assert import_cycles(root) == [["kbroker.server.a", "kbroker.server.b", "kbroker.server.c"]]


# The wiring builds each object with its collaborators (constructor arguments, in
# dependency order, as Kafka's KafkaServer.startup does); it never finishes one by
# assigning its attributes afterwards.
WIRING_FILES = ("broker.py", "broker_components.py", "ops/served_broker.py", "cluster/zk_broker.py")


def _patched_target(target: ast.expr) -> ast.Attribute | None:
    """The attribute of another object a target assigns (`a.b = `, `self.a.b = `), if any."""
    if isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            found = _patched_target(element)
            if found is not None:
                return found
        return None
    if not isinstance(target, ast.Attribute):
        return None
    owner = target.value
    if isinstance(owner, ast.Name) and owner.id == "self":
        return None  # the object's own field
    if isinstance(owner, (ast.Name, ast.Attribute)):
        return target
    return None


def patched_attributes(root: Path) -> list[str]:
    """`module:line target` for each assignment of another object's attribute."""
    found = []
    for rel in WIRING_FILES:
        path = root / rel
        if not path.exists():
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            else:
                continue
            for target in targets:
                hit = _patched_target(target)
                if hit is not None:
                    found.append(f"{module_name(path, root)}:{node.lineno} {ast.unparse(hit)}")
    return found


def test_the_wiring_passes_collaborators_to_constructors() -> None:
    assert patched_attributes(PACKAGE) == []


def test_the_check_finds_a_patched_attribute(tmp_path: Path) -> None:
    root = tmp_path / "kbroker"
    (root / "cluster").mkdir(parents=True)
    (root / "broker.py").write_text(
        "class B:\n"
        "    def __init__(self, rm):\n"
        "        self.rm = rm\n"
        "        self.rm.fetchers = 1\n"
        "        rm.is_alive = None\n"
        "        rm.count += 1\n"
        "        a, rm.b = 1, 2\n"
        "        rm.partitions[0] = 1\n")
    (root / "cluster" / "zk_broker.py").write_text(
        "def f(zk):\n    zk.on_fenced: object = None\n")
    assert patched_attributes(root) == [
        "kbroker.broker:4 self.rm.fetchers", "kbroker.broker:5 rm.is_alive",
        "kbroker.broker:6 rm.count", "kbroker.broker:7 rm.b",
        "kbroker.cluster.zk_broker:2 zk.on_fenced"]
