"""The perf tool's options as one frozen value, built from the command line or by bench/."""

from __future__ import annotations

from dataclasses import dataclass, field

COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")
ACKS = ("0", "1", "all", "-1")


@dataclass(frozen=True)
class PerfOptions:
    """One perf run: where, what, how much and how fast.

    `throughput` is records per second summed over all producer processes; a
    value <= 0 means as fast as possible. `partitions` > 0 creates the topic if
    it is missing. `client_config` holds extra librdkafka properties (`-X k=v`)
    that win over the tool's defaults. `transactional` producers write in
    transactions of `records_per_transaction` records (acks=all, idempotent).
    """

    bootstrap_server: str
    topic: str
    num_records: int
    record_size: int = 1024
    acks: str = "1"
    compression: str = "none"
    producers: int = 1
    consumers: int = 1
    throughput: float = -1.0
    linger_ms: float = 5.0
    batch_size: int = 1_000_000
    payload_file: str | None = None
    random_pool: int = 1000
    partitions: int = 0
    replication_factor: int = 1
    latency_sample_every: int = 0
    report_interval_s: float = 1.0
    timeout_s: float = 600.0
    idle_timeout_s: float = 10.0
    json_path: str | None = None
    quiet: bool = False
    client_config: dict[str, str] = field(default_factory=dict)
    transactional: bool = False
    records_per_transaction: int = 1000

    def __post_init__(self) -> None:
        if self.num_records <= 0:
            raise ValueError("--num-records must be positive")
        if self.record_size < 0:
            raise ValueError("--record-size must not be negative")
        if self.acks not in ACKS:
            raise ValueError(f"--acks must be one of {', '.join(ACKS)}")
        if self.compression not in COMPRESSION_TYPES:
            raise ValueError(f"--compression must be one of {', '.join(COMPRESSION_TYPES)}")
        if self.producers < 1 or self.consumers < 1:
            raise ValueError("--producers and --consumers must be at least 1")
        if self.random_pool < 1:
            raise ValueError("--random-pool must be at least 1")
        if self.batch_size < 1 or self.linger_ms < 0:
            raise ValueError("--batch-size must be positive and --linger-ms not negative")
        if self.records_per_transaction < 1:
            raise ValueError("--records-per-transaction must be at least 1")

    def sample_every(self) -> int:
        """Every how many records a producer asks for a delivery report (latency sample).

        A Python callback per record would cost more than the produce call
        itself at full speed; at a fixed modest rate every record is sampled.
        """
        if self.latency_sample_every > 0:
            return self.latency_sample_every
        if 0 < self.throughput <= 20_000:
            return 1
        return 32
