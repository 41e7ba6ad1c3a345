"""Network partitions for cluster tests: every broker in a network namespace of its own,
joined to the test's namespace (ZooKeeper and the clients stay there) through a router
namespace, and cuts made in the router.

    root namespace              router namespace <p>-rt        broker namespaces <p>-b<id>
    <p> 10.N.0.1/24  <------->  r0 10.N.0.254/24
    route 10.N.0.0/16 via       r<id> 10.N.<id>.1/24  <----->  eth0 10.N.<id>.2/24
      10.N.0.254                (ip_forward=1 here only)        default via 10.N.<id>.1

`<p>` is `kbf-<pid of the test process>`, N the first 10.N.0.0/16 (N = 200..249) that
no route of the root namespace covers. Only the root namespace's end of its veth pair
and the namespaces carry the prefix; deleting the router namespace deletes every other
interface, and every rule with it.

Cuts are policy-routing rules in the router (`ip rule add from A to B blackhole`): the
router drops the packets silently, as a dead switch port does. TCP sees no RST and no
ICMP, so connections hang until their own timeouts, as in a real partition; no
iptables or nftables is needed (neither is installed here, and tc netem is not
available). `isolate(b)` drops everything from and to a broker, `cut(a, b)` only what
goes between two brokers, `heal()` deletes every rule.

Clean-up: `remove()` SIGKILLs every process left in the namespaces (by the PIDs that
`ip netns pids` lists), then deletes the namespaces and the root-side link.
`remove_leftovers()` does the same for namespaces with the `kbf-` prefix whose test
process is gone (a run killed before its finalizers), so runs never meet each other's
leftovers and a concurrent run is left alone.

`unavailable()` says why no network can be made here (not root, no `ip netns`);
`made_network(ids)` is the whole life of one network (leftovers first, remove() always).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

PREFIX = "kbf-"
RULE_PRIORITY = 100  # and up: before the main table's lookup (32766), after the local one (0)


class NetworkError(RuntimeError):
    pass


def _ip(*args: str, check: bool = True) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise NetworkError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def unavailable() -> str | None:
    """Why namespaces cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "network partition tests need root (ip netns, veth pairs)"
    if shutil.which("ip") is None:
        return "network partition tests need iproute2's `ip`"
    probe = f"{PREFIX}{os.getpid()}-probe"
    try:
        _ip("netns", "add", probe)
    except NetworkError as e:
        return f"`ip netns add` does not work here: {e}"
    _ip("netns", "del", probe, check=False)
    return None


def _namespaces() -> list[str]:
    return [line.split()[0] for line in _ip("netns", "list").splitlines() if line.strip()]


def _kill_processes_in(namespace: str) -> None:
    pids = [int(p) for p in _ip("netns", "pids", namespace, check=False).split()]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _owner_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_leftovers() -> list[str]:
    """Remove what earlier runs left (namespaces, their processes, root-side links)
    when the run that made them is gone; the namespaces removed."""
    removed = []
    owners: set[int] = set()
    for ns in _namespaces():
        m = re.fullmatch(rf"{PREFIX}(\d+)-.+", ns)
        if m is None or _owner_alive(int(m.group(1))):
            continue
        owners.add(int(m.group(1)))
        _kill_processes_in(ns)
        _ip("netns", "del", ns, check=False)
        removed.append(ns)
    for line in _ip("-o", "link", "show").splitlines():
        m = re.match(rf"\d+: ({PREFIX}(\d+))[@:]", line)
        if m is not None and (int(m.group(2)) in owners or not _owner_alive(int(m.group(2)))):
            _ip("link", "del", m.group(1), check=False)
    return removed


def _free_subnet() -> int:
    routes = _ip("-4", "route", "show", "table", "all")
    for n in range(200, 250):
        if f"10.{n}." not in routes:
            return n
    raise NetworkError("no free 10.N.0.0/16 (N = 200..249) in the root namespace's routes")


class Network:
    """See the module docstring. create() before use, remove() always."""

    def __init__(self, broker_ids: Iterable[int]) -> None:
        self.prefix = f"{PREFIX}{os.getpid()}"
        self.broker_ids = sorted(broker_ids)
        if any(not 0 < b < 254 for b in self.broker_ids):
            raise ValueError("broker ids must lie in 1..253 (they name subnets)")
        self.router = f"{self.prefix}-rt"
        self.host_link = self.prefix
        self.subnet = -1
        self._rules: list[tuple[str, ...]] = []
        self._created = False

    # -- addresses -----------------------------------------------------------------------------
    @property
    def host_address(self) -> str:
        """The root namespace's address: ZooKeeper listens there."""
        return f"10.{self.subnet}.0.1"

    def namespace(self, broker_id: int) -> str:
        return f"{self.prefix}-b{broker_id}"

    def address(self, broker_id: int) -> str:
        return f"10.{self.subnet}.{broker_id}.2"

    def placements(self) -> dict[int, tuple[str, str]]:
        """broker id -> (namespace, address): what Cluster(namespaces=...) takes."""
        return {b: (self.namespace(b), self.address(b)) for b in self.broker_ids}

    # -- life cycle ----------------------------------------------------------------------------
    def create(self) -> Network:
        self.subnet = _free_subnet()
        self._created = True
        n = self.subnet
        _ip("netns", "add", self.router)
        _ip("-n", self.router, "link", "set", "lo", "up")
        subprocess.run(["ip", "netns", "exec", self.router, "sh", "-c",
                        "echo 1 > /proc/sys/net/ipv4/ip_forward"], check=True, timeout=30)
        _ip("link", "add", self.host_link, "type", "veth", "peer", "name", "r0", "netns", self.router)
        _ip("addr", "add", f"10.{n}.0.1/24", "dev", self.host_link)
        _ip("link", "set", self.host_link, "up")
        _ip("-n", self.router, "addr", "add", f"10.{n}.0.254/24", "dev", "r0")
        _ip("-n", self.router, "link", "set", "r0", "up")
        _ip("route", "add", f"10.{n}.0.0/16", "via", f"10.{n}.0.254", "dev", self.host_link)
        for b in self.broker_ids:
            ns = self.namespace(b)
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", self.router, "link", "add", f"r{b}", "type", "veth", "peer", "name", "eth0",
                "netns", ns)
            _ip("-n", self.router, "addr", "add", f"10.{n}.{b}.1/24", "dev", f"r{b}")
            _ip("-n", self.router, "link", "set", f"r{b}", "up")
            _ip("-n", ns, "addr", "add", f"10.{n}.{b}.2/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "route", "add", "default", "via", f"10.{n}.{b}.1")
        return self

    def remove(self) -> None:
        """Kill what still runs in the namespaces (by PID), delete them and the root link."""
        if not self._created:
            return
        self._created = False
        spaces = [self.namespace(b) for b in self.broker_ids] + [self.router]
        for ns in spaces:
            _kill_processes_in(ns)
        for ns in spaces:
            _ip("netns", "del", ns, check=False)
        _ip("link", "del", self.host_link, check=False)
        deadline = time.monotonic() + 10
        while self.host_link in _ip("-o", "link", "show") and time.monotonic() < deadline:
            time.sleep(0.05)  # a veth goes when both namespaces' last users have

    # -- cuts ------------------------------------------------------------------------------------
    def _add_rule(self, *selector: str) -> None:
        # A priority of its own: the kernel takes `from A` as a duplicate of `from A to B`
        # at the same priority (a selector left out is not compared).
        priority = RULE_PRIORITY + len(self._rules)
        rule = (*selector, "blackhole", "pref", str(priority))
        _ip("-n", self.router, "rule", "add", *rule)
        self._rules.append(rule)

    def isolate(self, broker_id: int) -> None:
        """Nothing reaches the broker, nothing leaves it (ZooKeeper, brokers, clients)."""
        addr = self.address(broker_id)
        self._add_rule("from", addr)
        self._add_rule("to", addr)

    def cut(self, a: int, b: int) -> None:
        """Only the link between brokers a and b: both still reach everyone else."""
        self._add_rule("from", self.address(a), "to", self.address(b))
        self._add_rule("from", self.address(b), "to", self.address(a))

    def heal(self) -> None:
        """Delete every cut."""
        while self._rules:
            _ip("-n", self.router, "rule", "del", *self._rules.pop(), check=False)

    def rules(self) -> str:
        return _ip("-n", self.router, "rule", "show")


@contextmanager
def made_network(broker_ids: Iterable[int]) -> Iterator[Network]:
    """A network for these brokers, after removing earlier runs' leftovers; removed at the
    end whatever happens (call `unavailable()` first)."""
    remove_leftovers()
    net = Network(broker_ids)
    try:
        yield net.create()
    finally:
        net.remove()
