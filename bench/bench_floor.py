"""Broker CPU per GB produced, beside the machine's floor for the same bytes.

The floor is bench/floor/ingest_floor.c: a C program that receives bytes from a
loopback TCP socket and writes them to a file in the page cache, nothing else (no
parsing, CRC, index or response), built here with gcc -O2. It is what any broker on
this machine spends at least per GB produced; kbroker's figure beside it says how much
of its produce cost is its own. Each repeat, in turn:

    floor      ingest_floor receiving --floor-gb GiB in 1 MiB writes (its own CPU, getrusage)
    kbroker    a fresh broker taking 1 KiB and 100 B records from two producers, broker
               CPU from /proc per GiB of record values: `--client kcat` (default, as issue
               17 measured: two kcat producers, one per partition, linger 5 ms, 1 MB
               batches, acks=1) or `--client perf` (`kbroker perf produce`, confluent-kafka
               in two processes: slower producers, so smaller requests)

    python bench/bench_floor.py                 # 3 repeats
    python bench/bench_floor.py --broker tansu  # another broker beside the same floor

Medians go to stdout and bench/results/floor.json, with the ratio broker / floor.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from bench_kcat_consume import admin_create, kcat  # noqa: E402
from brokers import RunningBroker, free_port, resolve_spec  # noqa: E402

RESULTS = BENCH / "results" / "floor.json"
GIB = 1 << 30
SIZES = {"1KiB": (1024, 1_000_000), "100B": (100, 5_000_000)}


def build(work: Path) -> Path:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        raise SystemExit("no C compiler (gcc) to build the floor")
    binary = work / "ingest_floor"
    subprocess.run([gcc, "-O2", "-o", str(binary), str(BENCH / "floor" / "ingest_floor.c")], check=True)
    return binary


def floor_run(binary: Path, work: Path, gib: float) -> dict[str, Any]:
    port = free_port()
    out = work / "floor.out"
    receiver = subprocess.Popen([str(binary), str(port), str(out), str(1 << 20)], stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout is not None
        receiver.stdout.readline()  # {"listening": port}
        subprocess.run([str(binary), "--send", str(port), str(int(gib * GIB)), str(1 << 20)], check=True, timeout=600)
        result = json.loads(receiver.stdout.readline())
        receiver.wait(60)
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait()
        out.unlink(missing_ok=True)
    return {"cpu_s_per_gib": result["cpu_s"] / (result["bytes"] / GIB), "elapsed_s": result["elapsed_s"]}


def broker_run(spec_text: str, work: Path, record_size: int, records: int, client: str) -> dict[str, Any]:
    broker = RunningBroker(resolve_spec(spec_text), work, partitions=2)
    try:
        broker.wait_ready()
        if client == "kcat":
            admin_create(broker.bootstrap, "floor")
            payload = work / "payload"
            with open(payload, "wb") as f:
                line = b"x" * (record_size - 1) + b"\n"
                f.write(line * (records // 2))
            cpu0 = broker.cpu_seconds()
            began = time.monotonic()
            procs = [subprocess.Popen([kcat(), "-P", "-b", broker.bootstrap, "-t", "floor", "-p", str(i),
                                       "-X", "linger.ms=5", "-X", "batch.size=1000000", "-X", "acks=1",
                                       "-l", str(payload)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                     for i in range(2)]
            for p in procs:
                _, err = p.communicate(timeout=900)
                if p.returncode != 0:
                    raise RuntimeError(f"kcat failed: {err.decode()[-500:]}")
            elapsed = time.monotonic() - began
            cpu = broker.cpu_seconds() - cpu0
            payload.unlink()
            rate = records / elapsed
        else:
            out = work / "perf.json"
            args = [sys.executable, "-m", "kbroker.perf", "produce", "--bootstrap-server", broker.bootstrap,
                    "--topic", "floor", "--partitions", "2", "--num-records", str(records),
                    "--record-size", str(record_size), "--producers", "2", "--acks", "1", "--linger-ms", "5",
                    "--batch-size", str(1 << 20), "--quiet", "--json", str(out)]
            cpu0 = broker.cpu_seconds()
            subprocess.run(args, check=True, capture_output=True, timeout=900)
            cpu = broker.cpu_seconds() - cpu0
            rate = json.loads(out.read_text())["result"]["records_per_s"]
        gib = records * record_size / GIB
        return {"cpu_s_per_gib": cpu / gib, "records_per_s": rate}
    finally:
        broker.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--broker", default="kbroker")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--floor-gb", type=float, default=1.0)
    ap.add_argument("--client", choices=("kcat", "perf"), default="kcat")
    ap.add_argument("--json", type=Path, default=RESULTS)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kbroker-bench-floor-"))
    runs: list[dict[str, Any]] = []
    try:
        binary = build(work)
        for repeat in range(args.repeats):
            runs.append({"repeat": repeat, "kind": "floor", **floor_run(binary, work, args.floor_gb)})
            for name, (size, records) in SIZES.items():
                runs.append({"repeat": repeat, "kind": name, **broker_run(args.broker, work, size, records, args.client)})
            print("repeat", repeat, "  ".join(f"{r['kind']} {r['cpu_s_per_gib']:.2f} CPU-s/GiB"
                                              for r in runs if r["repeat"] == repeat), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    floor = statistics.median(r["cpu_s_per_gib"] for r in runs if r["kind"] == "floor")
    summary: dict[str, Any] = {"floor_cpu_s_per_gib": floor}
    print(f"floor (recv + write to the page cache, C): {floor:.2f} CPU-s/GiB")
    for name in SIZES:
        med = statistics.median(r["cpu_s_per_gib"] for r in runs if r["kind"] == name)
        rate = statistics.median(r["records_per_s"] for r in runs if r["kind"] == name)
        summary[name] = {"cpu_s_per_gib": med, "records_per_s": rate, "ratio_to_floor": med / floor}
        print(f"{args.broker} produce ({args.client}) {name}: {med:.2f} CPU-s/GiB ({rate:,.0f} records/s), {med / floor:.2f}x the floor")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"broker": args.broker, "client": args.client, "runs": runs, "summary": summary}, indent=1))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
