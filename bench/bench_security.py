"""TLS and SASL_SSL against PLAINTEXT: produce and consume throughput and broker CPU per GB.

Each repeat starts a fresh broker per config (a new process, port and data dir) and
runs on it `kbroker perf produce` then `kbroker perf consume` (1 KiB records, acks=1,
one client process each), with the client settings users give librdkafka:

    plaintext   PLAINTEXT (Fetch leaves through sendfile, zero-copy)
    ssl         SSL, TLS 1.3, server certificate only (Fetch slices read and encrypted)
    sasl_ssl    SASL_SSL with PLAIN over the same TLS
    acls        PLAINTEXT with ACLs on (AclAuthorizer, allow.everyone.if.no.acl.found=true
                so the anonymous client is allowed, and 200 ACLs on other topics that
                every check of a topic looks through): the cost of authorization
                checks on the produce and fetch paths

Configs run in a shuffled order per repeat. Broker CPU is utime+stime from /proc over
each perf run (bench/brokers.py); on this shared 2-core machine compare ratios within
one run, not absolute figures. Certificates are made with `openssl` in a temp dir.

    python bench/bench_security.py                      # 300k records, 3 repeats
    python bench/bench_security.py --records 1000000 --repeats 5
    # before/after in one run: plaintext and ssl of another checkout (built in place) too,
    # as plaintext@base and ssl@base, each compared with plaintext of its own code
    git worktree add /tmp/kbroker-base main && (cd /tmp/kbroker-base && \
        ../path/to/.venv/bin/python setup.py build_ext --inplace -q)
    python bench/bench_security.py --configs plaintext,ssl --baseline /tmp/kbroker-base

Results: bench/results/security.json (every run, medians, ratios against plaintext).
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokers import REPO_ROOT, BrokerSpec, RunningBroker, free_port  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "security.json"
CONFIGS = ("plaintext", "ssl", "sasl_ssl", "acls")
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_bench="bench-secret";')


def make_certs(d: Path) -> None:
    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True, timeout=60)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
            "-days", "2", "-subj", "/CN=bench-ca")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
            "-subj", "/CN=localhost")
    (d / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "san.ext")
    (d / "server.pem").write_text((d / "server.key").read_text() + (d / "server.crt").read_text())


def spec(config: str, certs: Path, tls_port: int,
         root: Path = REPO_ROOT) -> tuple[BrokerSpec, dict[str, str]]:
    """The broker (its first listener PLAINTEXT on {port}, for readiness) and the
    client's -X settings for this config; `root`: the checkout whose kbroker runs."""
    overrides = {"log.dirs": "{data_dir}", "num.partitions": "{partitions}"}
    client: dict[str, str] = {}
    if config in ("ssl", "sasl_ssl"):
        name = config.upper()
        overrides.update({
            "listeners": f"PLAINTEXT://127.0.0.1:{{port}},{name}://127.0.0.1:{tls_port}",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs / "server.pem"),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs / "ca.crt")})
        client = {"security.protocol": name, "ssl.ca.location": str(certs / "ca.crt")}
        if config == "sasl_ssl":
            overrides.update({"sasl.enabled.mechanisms": "PLAIN",
                              "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS})
            client.update({"sasl.mechanism": "PLAIN", "sasl.username": "bench",
                           "sasl.password": "bench-secret"})
    else:
        overrides["listeners"] = "PLAINTEXT://127.0.0.1:{port}"
    if config == "acls":
        overrides.update({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                          "allow.everyone.if.no.acl.found": "true"})
    command = f"{shlex.quote(sys.executable)} -m kbroker serve " + " ".join(
        f"--override {shlex.quote(k + '=' + v)}".replace("%7Bport%7D", "{port}")
        for k, v in overrides.items())
    command = command.replace("'log.dirs={data_dir}'", "log.dirs={data_dir}")
    return BrokerSpec(config, command, env={"PYTHONPATH": str(root)}, cwd=str(root)), client


def add_acls(broker: RunningBroker) -> None:
    """200 ACLs on other topics (the bench topic has none: allowed by
    allow.everyone.if.no.acl.found after every topic ACL was looked at)."""
    subprocess.run([sys.executable, "-m", "kbroker", "acls", "add", "--bootstrap-server",
                    broker.bootstrap, "--allow-principal", "User:other", "--operation", "Read",
                    *[a for i in range(200) for a in ("--topic", f"other-{i}")]],
                   check=True, capture_output=True, timeout=120)


def perf(mode: str, bootstrap: str, client: dict[str, str], args: argparse.Namespace,
         out: Path) -> dict[str, Any]:
    extra = ["--num-records", str(args.records)] + (
        ["--record-size", str(args.record_size), "--partitions", "3"] if mode == "produce" else [])
    x = [a for k, v in client.items() for a in ("-X", f"{k}={v}")]
    done = subprocess.run(
        [sys.executable, "-m", "kbroker.perf", mode, "--bootstrap-server", bootstrap,
         "--topic", "bench-security", "--quiet", "--timeout", "600", "--json", str(out),
         *extra, *x], capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"perf {mode} failed:\n{done.stdout}\n{done.stderr}")
    result = json.loads(out.read_text())["result"]
    return {"records_per_s": float(result["records_per_s"]), "mb_per_s": float(result["mb_per_s"]),
            "records": result["records"]}


def run_config(config: str, certs: Path, tmp: Path, args: argparse.Namespace,
               repeat: int) -> dict[str, Any]:
    tls_port = free_port()
    name, _, base = config.partition("@")
    root = args.baseline if base else REPO_ROOT
    broker_spec, client = spec(name, certs, tls_port, root)
    broker_spec.name = config
    config = name
    broker = RunningBroker(broker_spec, tmp, partitions=3)
    row: dict[str, Any] = {}
    try:
        broker.wait_ready()
        if config == "acls":
            add_acls(broker)
        bootstrap = f"127.0.0.1:{tls_port}" if config in ("ssl", "sasl_ssl") else broker.bootstrap
        gb = args.records * args.record_size / 1e9
        for mode in ("produce", "consume"):
            before = broker.cpu_seconds()
            r = perf(mode, bootstrap, client, args, tmp / f"{config}-{mode}-{repeat}.json")
            cpu = broker.cpu_seconds() - before
            row[mode] = {**r, "broker_cpu_s": cpu, "broker_cpu_s_per_gb": cpu / gb}
    finally:
        broker.stop()
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--json", type=Path, default=RESULTS)
    ap.add_argument("--baseline", type=Path, default=None,
                    help="another checkout (core built in place): its configs run too, as <config>@base")
    args = ap.parse_args()
    configs = [c for c in args.configs.split(",") if c]
    if args.baseline is not None:
        configs += [f"{c}@base" for c in configs]
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in configs}
    with tempfile.TemporaryDirectory(prefix="kbroker-bench-security-") as tmp_name:
        tmp = Path(tmp_name)
        make_certs(tmp)
        for repeat in range(args.repeats):
            order = random.sample(configs, len(configs))
            for config in order:
                runs[config].append(run_config(config, tmp, tmp, args, repeat))
    median = {c: {mode: {k: statistics.median(r[mode][k] for r in rs)
                         for k in ("records_per_s", "mb_per_s", "broker_cpu_s_per_gb")}
                  for mode in ("produce", "consume")} for c, rs in runs.items()}
    base = median.get("plaintext")
    print(f"{'config':10} {'mode':8} {'records/s':>12} {'MB/s':>8} {'CPU s/GB':>9}"
          + ("  vs plaintext (rate, CPU/GB)" if base else ""))
    ratios: dict[str, Any] = {}
    for c, modes in median.items():
        for mode, m in modes.items():
            line = (f"{c:10} {mode:8} {m['records_per_s']:>12,.0f} {m['mb_per_s']:>8.1f} "
                    f"{m['broker_cpu_s_per_gb']:>9.2f}")
            own = median.get("plaintext@base") if c.endswith("@base") else base
            if own and c not in ("plaintext", "plaintext@base"):
                rate = m["records_per_s"] / own[mode]["records_per_s"]
                cpu = m["broker_cpu_s_per_gb"] / own[mode]["broker_cpu_s_per_gb"]
                ratios.setdefault(c, {})[mode] = {"rate": rate, "cpu_per_gb": cpu}
                line += f"  {rate:.2f}x, {cpu:.2f}x"
            print(line)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"options": {k: v for k, v in vars(args).items() if k != "json"},
                                     "runs": runs, "median": median, "ratios": ratios},
                                    indent=2, default=str))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
