"""The follower section of bench/bench_cluster.py: what a follower broker spends copying
a GB, with the kbroker of this tree and of another one (issue 35: "the follower's CPU per
replicated GB is lower"), cell by cell in one run.

A cell is a fresh 3-broker cluster whose topic has every partition led by broker 1 (the
replica assignment [1, 2, 3] for each): brokers 2 and 3 only follow. `perf produce` sends
the records with acks=all or acks=1; a follower's CPU is utime+stime of its process tree
(/proc/PID/stat) from just before the producer starts until the leader's high watermark
of every partition covers every record, that is until both followers have copied all of
it (with acks=1 they are still copying when the producer is done). Divided by the GB
(2^30 bytes of record values) each follower copied: CPU-s per replicated GB ("raw").
A follower spends CPU with nothing to copy too (its parked fetches, ZooKeeper, timers),
and the copy takes seconds more than the producer on a loaded machine, so each cell
then measures that rate over --follower-idle-s, everything copied (not before: the
topic's creation and the warm-up still cost CPU then); "net" takes rate x copy time off
each follower's CPU before dividing.

The brokers of a cell run one tree's kbroker: `python -m kbroker serve` started in that
tree with it first on PYTHONPATH (this interpreter, so the same Python and dependencies),
checked from the core modules the follower processes have mapped. The other tree is a
built checkout (a path) or a git ref built into a temporary worktree as bench/matrix.py's
`kbroker-ref:` is. Everything else (the Cluster that starts the brokers, the producers,
the measuring) is this tree's.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import brokers

THIS_TREE = Path(__file__).resolve().parent.parent
GB = 1024**3
LEADER, FOLLOWERS = 1, (2, 3)
CORE_MODULE = "kbroker/_core/"


@dataclass
class BrokerTree:
    """A kbroker source tree with its core built in place, named for the report."""

    name: str
    path: Path
    cleanup: Callable[[], None] = field(default=lambda: None)


def compared_trees(other: str) -> list[BrokerTree]:
    """[the other tree ("old"), this tree ("new")]: `other` is a built checkout's path or a
    git ref to build (into a temporary worktree, removed by the tree's cleanup)."""
    this = BrokerTree("new", THIS_TREE)
    if Path(other).is_dir():
        return [BrokerTree("old", Path(other).resolve()), this]
    spec = brokers.kbroker_ref_spec(other)
    assert spec.prepare is not None and spec.cwd is not None
    print(f"building {other} in {spec.cwd}", flush=True)
    spec.prepare()
    return [BrokerTree("old", Path(spec.cwd), spec.cleanup or (lambda: None)), this]


@contextmanager
def running_from(tree: BrokerTree | None) -> Iterator[None]:
    """Processes started meanwhile run `python -m kbroker` from `tree` (None: this one):
    its directory is the working directory (first on sys.path with -m) and PYTHONPATH."""
    if tree is None or tree.path == THIS_TREE:
        yield
        return
    cwd, saved = os.getcwd(), os.environ.get("PYTHONPATH")
    os.chdir(tree.path)
    os.environ["PYTHONPATH"] = str(tree.path) + (os.pathsep + saved if saved else "")
    try:
        yield
    finally:
        os.chdir(cwd)
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def core_tree(pid: int) -> Path | None:
    """The source tree whose kbroker/_core extension modules process `pid` has mapped."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return None
    for line in maps.splitlines():
        path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
        if CORE_MODULE in path and path.endswith(".so"):
            return Path(path.split(CORE_MODULE)[0])
    return None


def check_tree(pids: dict[int, int], tree: BrokerTree) -> None:
    """Every broker runs `tree`'s core (else the comparison compares a tree with itself)."""
    found = {b: core_tree(pid) for b, pid in pids.items()}
    wrong = {b: str(p) for b, p in found.items() if p is None or p.resolve() != tree.path.resolve()}
    if wrong:
        raise RuntimeError(f"brokers not running {tree.path}'s core: {wrong}")


def cpu_seconds(pids: dict[int, int]) -> dict[int, float]:
    return {b: brokers.tree_cpu_seconds(pid) for b, pid in pids.items()}


def follower_result(before: dict[int, float], after: dict[int, float], copied_bytes: int,
                    elapsed_s: float, idle_cpu_per_s: dict[int, float]) -> dict[str, Any]:
    """CPU-s per replicated GB of each follower (raw, and net of its idle rate over the
    copy's elapsed time), their means, and the leader's (raw) per GB taken."""
    gb = copied_bytes / GB
    cpu = {b: after[b] - before[b] for b in before}
    per_gb = {b: cpu[b] / gb for b in FOLLOWERS if b in cpu} if gb else {}
    net = {b: (cpu[b] - idle_cpu_per_s[b] * elapsed_s) / gb for b in per_gb}
    return {
        "broker_cpu_s": {str(b): round(s, 3) for b, s in cpu.items()},
        "idle_cpu_s_per_s": {str(b): round(s, 4) for b, s in idle_cpu_per_s.items()},
        "follower_cpu_s_per_gb": {str(b): v for b, v in per_gb.items()},
        "follower_cpu_s_per_gb_mean": statistics.mean(per_gb.values()) if per_gb else None,
        "follower_net_cpu_s_per_gb": {str(b): v for b, v in net.items()},
        "follower_net_cpu_s_per_gb_mean": statistics.mean(net.values()) if net else None,
        "leader_cpu_s_per_gb": cpu[LEADER] / gb if gb and LEADER in cpu else None,
        "replicated_gb": gb,
        "copy_elapsed_s": elapsed_s,
    }


def follower_summary(runs: list[dict[str, Any]], trees: list[str]) -> dict[str, Any]:
    """The summary of the followers' raw and net CPU-s per GB (summary_of)."""
    return {kind: summary_of(runs, trees, f"follower{infix}_cpu_s_per_gb_mean")
            for kind, infix in (("raw", ""), ("net", "_net"))}


def summary_of(runs: list[dict[str, Any]], trees: list[str], key: str) -> dict[str, Any]:
    """Per cell (tree/acks): median and values of runs' `key`; per acks, new/old: the
    ratio of the medians, and the ratios of the runs paired by repeat (each repeat ran
    both trees back to back) with their median, min and max."""
    ok = [r for r in runs if not r.get("incomplete") and r.get(key)]
    cells: dict[str, dict[str, Any]] = {}
    for cell in dict.fromkeys(r["cell"] for r in runs):
        values = [r[key] for r in ok if r["cell"] == cell]
        leader = [r["leader_cpu_s_per_gb"] for r in ok if r["cell"] == cell]
        cells[cell] = {"follower_cpu_s_per_gb": statistics.median(values) if values else None,
                       "values": values, "spread": [min(values), max(values)] if values else None,
                       "leader_cpu_s_per_gb": statistics.median(leader) if leader else None,
                       "repeats": len(values)}
    ratios: dict[str, Any] = {}
    old, new = trees
    for acks in dict.fromkeys(r["acks"] for r in runs):
        by = {(r["tree"], r["repeat"]): r[key] for r in ok if r["acks"] == acks}
        paired = [by[(new, i)] / by[(old, i)] for i in sorted({i for _, i in by})
                  if (new, i) in by and (old, i) in by]
        a, b = cells.get(f"{new}/acks-{acks}", {}), cells.get(f"{old}/acks-{acks}", {})
        ratios[f"acks-{acks}"] = {
            "median_ratio": (a["follower_cpu_s_per_gb"] / b["follower_cpu_s_per_gb"]
                             if a.get("follower_cpu_s_per_gb") and b.get("follower_cpu_s_per_gb") else None),
            "paired": paired,
            "paired_median": statistics.median(paired) if paired else None,
            "paired_min": min(paired) if paired else None,
            "paired_max": max(paired) if paired else None,
        }
    return {"cells": cells, f"{new}/{old}": ratios}
