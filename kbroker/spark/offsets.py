"""Offset planning on the driver: which partitions, which offsets, which ranges.

`OffsetPlanner` resolves the subscription (subscribe / subscribePattern / assign)
to topic partitions and an OffsetSpec (earliest, latest, JSON offsets, timestamps)
to concrete offsets with Metadata and ListOffsets. The pure functions below it
follow Spark's Kafka source:

- `rate_limit`: maxOffsetsPerTrigger spread over partitions in proportion to each
  partition's backlog; a share below one record rounds up (no partition starves),
  others round down; never past the partition's latest offset.
- `split_ranges`: maxRecordsPerPartition first splits each range into
  ceil(size / maxRecordsPerPartition) parts; then, if there are fewer ranges than
  minPartitions, the ranges whose share round(size / total * minPartitions) is one stay
  whole and the others get round(size / rest * (minPartitions - whole ranges)) parts
  (KafkaOffsetRangeCalculator). Parts are of nearly equal size, the remainder going to
  the last parts. Without either option there is one range per topic partition. Empty
  ranges are dropped.

Offset lookups on the driver are retried fetchOffset.numRetries times,
fetchOffset.retryIntervalMs apart, as Spark's KafkaOffsetReader retries them.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from kbroker.client import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    AuthenticationError,
    KafkaClient,
    KafkaClientError,
    TopicPartition,
)
from kbroker.spark.options import EARLIEST, LATEST, ClientOptions, OffsetSpec, SourceOptions
from kbroker.spark.security import connection_security

log = logging.getLogger(__name__)
T = TypeVar("T")

INTERNAL_TOPIC_PREFIX = "__"


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (retention, deleted topic, truncation)."""


DATA_LOSS_HINT_FAIL = (' Some data may have been lost: it aged out of the log (retention) or the '
                       'topic was deleted or truncated before the query read it. To go on '
                       'anyway, set the source option "failOnDataLoss" to "false".')
DATA_LOSS_HINT_WARN = (' Some data may have been lost: it aged out of the log (retention) or the '
                       'topic was deleted or truncated before the query read it. To stop the '
                       'query in such cases, set the source option "failOnDataLoss" to "true".')


def report_data_loss(fail: bool, message: str) -> None:
    if fail:
        raise DataLossError(message + DATA_LOSS_HINT_FAIL)
    log.warning("%s%s", message, DATA_LOSS_HINT_WARN)


@dataclass(frozen=True, order=True)
class OffsetRange:
    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


def new_client(opts: ClientOptions) -> KafkaClient:
    return KafkaClient(opts.bootstrap_servers, client_id=opts.client_id,
                       request_timeout_ms=opts.request_timeout_ms,
                       retry_backoff_ms=opts.retry_backoff_ms,
                       security=connection_security(opts.security))


class OffsetPlanner:
    """Driver-side lookups for one query; opens its client lazily (picklable until then)."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._client: KafkaClient | None = None

    def __getstate__(self) -> dict[str, object]:
        return {"opts": self.opts, "_client": None}

    @property
    def client(self) -> KafkaClient:
        if self._client is None:
            self._client = new_client(self.opts.client)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _retrying(self, what: str, call: Callable[[], T]) -> T:
        """call(), retried fetchOffset.numRetries times after a client error."""
        retries = self.opts.client.offset_retries
        for attempt in range(retries + 1):
            try:
                return call()
            except AuthenticationError:
                raise
            except KafkaClientError as e:
                if attempt >= retries:
                    raise
                log.warning("%s failed (%s); retry %d of %d", what, e, attempt + 1, retries)
                self.close()  # a fresh client: new connections, new metadata
                time.sleep(self.opts.client.offset_retry_interval_ms / 1000.0)
        raise AssertionError("unreachable")

    def topic_partitions(self) -> list[TopicPartition]:
        return self._retrying("Metadata", self._topic_partitions)

    def _topic_partitions(self) -> list[TopicPartition]:
        o = self.opts
        if o.strategy == "assign":
            return list(o.assigned)
        if o.strategy == "subscribe":
            topics = list(o.topics)
        else:
            rx = re.compile(o.pattern)
            topics = [t for t in self.client.all_topics()
                      if rx.fullmatch(t) and not t.startswith(INTERNAL_TOPIC_PREFIX)]
        found = self.client.topic_partitions(topics)
        return sorted(TopicPartition(t, p) for t in topics for p in found.get(t, []))

    def earliest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        if not tps:
            return {}
        return self._retrying("ListOffsets", lambda: self.client.list_offsets(
            {tp: EARLIEST_TIMESTAMP for tp in tps}))

    def latest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The high watermarks, or the last stable offsets under read_committed (Spark's
        consumer with isolation.level=read_committed plans up to those)."""
        if not tps:
            return {}
        return self._retrying("ListOffsets", lambda: self.client.list_offsets(
            {tp: LATEST_TIMESTAMP for tp in tps}, self.opts.client.isolation_level))

    def resolve(self, spec: OffsetSpec, tps: list[TopicPartition],
                starting: bool) -> dict[TopicPartition, int]:
        """Concrete offsets for `tps` (JSON offsets may still say -2/-1: resolved here)."""
        if spec.kind == "earliest":
            return self.earliest(tps)
        if spec.kind == "latest":
            return self.latest(tps)
        if spec.kind == "offsets":
            return self._specific(spec.offsets, tps, "startingOffsets" if starting
                                  else "endingOffsets")
        if spec.kind == "timestamps":
            name = "startingOffsetsByTimestamp" if starting else "endingOffsetsByTimestamp"
            self._check_all_given(spec.offsets, tps, name)
            return self._by_timestamp(dict(spec.offsets), starting)
        return self._by_timestamp({tp: spec.timestamp for tp in tps}, starting)

    def _check_all_given(self, given: Mapping[TopicPartition, int], tps: list[TopicPartition],
                         name: str) -> None:
        if set(given) != set(tps):
            raise ValueError(f"{name} must name exactly the partitions of the subscription: "
                             f"given {sorted(given)}, subscribed {sorted(tps)}")

    def _specific(self, given: Mapping[TopicPartition, int], tps: list[TopicPartition],
                  name: str) -> dict[TopicPartition, int]:
        self._check_all_given(given, tps, name)
        result = dict(given)
        want_earliest = [tp for tp, o in given.items() if o == EARLIEST]
        want_latest = [tp for tp, o in given.items() if o == LATEST]
        result.update(self.earliest(want_earliest))
        result.update(self.latest(want_latest))
        return result

    def _by_timestamp(self, timestamps: dict[TopicPartition, int],
                      starting: bool) -> dict[TopicPartition, int]:
        found = self._retrying("ListOffsets", lambda: self.client.list_offsets(
            timestamps)) if timestamps else {}
        missing = [tp for tp, off in found.items() if off < 0]
        if not missing:
            return found
        if starting and self.opts.by_timestamp_strategy == "error":
            raise ValueError(f"no offset matches the starting timestamp in {missing}; set "
                             "startingOffsetsByTimestampStrategy=latest to start at the end")
        found.update(self.latest(missing))  # past every record: the end of the partition
        return found


def rate_limit(limit: int, start: Mapping[TopicPartition, int],
               latest: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """End offsets reading at most about `limit` records from `start` (see module doc)."""
    sizes = {tp: end - start[tp] for tp, end in latest.items()
             if tp in start and end - start[tp] > 0}
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(latest)
    ends = {}
    for tp, end in latest.items():
        size = sizes.get(tp)
        if size is None:
            ends[tp] = end
            continue
        share = limit * (size / total)
        step = math.ceil(share) if share < 1 else math.floor(share)
        ends[tp] = min(end, start[tp] + step)
    return ends


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """`r` in `parts` nearly equal parts, the remainder going to the last ones."""
    out = []
    remaining = r.size
    start = r.from_offset
    for i in range(parts):
        n = remaining // (parts - i)
        remaining -= n
        end = min(start + n, r.until_offset)
        if end > start:
            out.append(OffsetRange(r.topic, r.partition, start, end))
        start = end
    return out


def _part_count(size: int, total: int, parts: int) -> int:
    return max(math.floor(size / total * parts + 0.5), 1)  # Scala's math.round: half up


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None,
                 max_records_per_partition: int | None = None) -> list[OffsetRange]:
    """One range per partition, or more for maxRecordsPerPartition / minPartitions
    (module doc)."""
    ranges = [r for r in ranges if r.size > 0]
    if max_records_per_partition:
        ranges = [part for r in ranges
                  for part in _divide(r, -(-r.size // max_records_per_partition))]
    if not min_partitions or min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)
    whole = [r for r in ranges if _part_count(r.size, total, min_partitions) == 1]
    rest_total = total - sum(r.size for r in whole)
    rest_parts = max(min_partitions - len(whole), 1)
    out = []
    for r in ranges:
        if r in whole:
            out.append(r)
        else:
            out += _divide(r, _part_count(r.size, rest_total, rest_parts))
    return out
