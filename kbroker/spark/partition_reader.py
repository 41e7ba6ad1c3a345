"""Read one offset range of one partition as Arrow RecordBatches (runs in Spark tasks).

The loop: Fetch from the partition leader, decode the raw record batches in
Cython (kbroker._core.batch_decode) into column buffers, wrap them as Arrow
arrays, yield a RecordBatch every `max_records_per_arrow_batch` rows. Fetches
are pipelined: as soon as a response arrives, the next offset is read from the
batch headers and the next Fetch is sent before this one is decoded, so the
broker prepares data while the task decodes.

Leader changes: a connection error or a retriable error code (NOT_LEADER_OR_FOLLOWER,
FENCED_LEADER_EPOCH...) drops the connection, backs off and refreshes the metadata
to find the partition's leader, then fetches on from the same offset.

Data loss (failOnDataLoss): a Fetch answered OFFSET_OUT_OF_RANGE below the log
start offset, or records that begin past the requested offset while the log
start offset is past it too, mean that retention removed offsets this range
needs. With failOnDataLoss=true that raises DataLossError; with false the reader
logs a warning and goes on from the first offset still there. Offsets missing
above the high watermark (a truncated or recreated partition) end the range early.
Gaps below the log start offset are not loss when they come from compaction or
transaction markers; those are skipped silently, as Kafka consumers do.

kafkaConsumer.pollTimeoutMs: a task that gets no records for that long (errors, empty
answers below the high watermark) fails with a TimeoutError, as Spark's consumer does;
Spark then retries the task.

read_committed (kafka.isolation.level): Fetch asks for committed data (up to the last
stable offset, which bounds the planned ranges too) and the decoder skips the batches of
the aborted transactions the broker lists with each response.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pyarrow as pa

from kbroker._core.batch_decode import scan_next_offset
from kbroker.client import AuthenticationError, KafkaClient, KafkaClientError, TopicPartition
from kbroker.client.client import RETRIABLE
from kbroker.common.error_code import ErrorCode
from kbroker.spark.arrow import new_decoder, record_batch
from kbroker.spark.offsets import OffsetRange, new_client, report_data_loss
from kbroker.spark.options import ClientOptions

log = logging.getLogger(__name__)

MAX_FETCH_BYTES = 256 << 20
MAX_ATTEMPTS = 60
MAX_ARROW_DATA_BYTES = 64 << 20


class PartitionReader:
    """Fetches [from_offset, until_offset) of one partition; one connection, one thread."""

    def __init__(self, client_opts: ClientOptions, offset_range: OffsetRange, schema: pa.Schema,
                 fail_on_data_loss: bool = True, max_records_per_arrow_batch: int = 65536,
                 client: KafkaClient | None = None) -> None:
        self.opts = client_opts
        self.range = offset_range
        self.tp = TopicPartition(offset_range.topic, offset_range.partition)
        self.schema = schema
        self.fail_on_data_loss = fail_on_data_loss
        self.max_rows = max_records_per_arrow_batch
        self._own_client = client is None
        self.client = client if client is not None else new_client(client_opts)
        self.partition_max_bytes = client_opts.max_partition_fetch_bytes
        self.bytes_fetched = 0
        self._progress_at = time.monotonic()

    def close(self) -> None:
        if self._own_client:
            self.client.close()

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        try:
            yield from self._batches()
        finally:
            self.close()

    def _send(self, leader: int, offset: int) -> None:
        self.client.send_fetch(leader, self.client.fetch_request(
            {self.tp: offset}, self.partition_max_bytes, max_wait_ms=self.opts.fetch_max_wait_ms,
            min_bytes=self.opts.fetch_min_bytes, max_bytes=max(self.opts.fetch_max_bytes, self.partition_max_bytes),
            isolation_level=self.opts.isolation_level))

    def _batches(self) -> Iterator[pa.RecordBatch]:
        cols = new_decoder(self.schema, check_crcs=self.opts.check_crcs)
        offset, until = self.range.from_offset, self.range.until_offset
        leader = self.client.leader_for(self.tp)
        in_flight = False
        failures = 0
        while offset < until:
            try:
                if not in_flight:
                    self._send(leader, offset)
                in_flight = False
                fetched = self.client.receive_fetch(leader).get(self.tp)
            except AuthenticationError:
                raise
            except KafkaClientError as e:  # the leader is gone: ask who leads now
                in_flight = False
                failures = self._failed(failures, str(e))
                leader = self._new_leader(leader, failures)
                continue
            if fetched is None or fetched.error_code != ErrorCode.NONE:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if fetched is None else \
                    fetched.error_code
                if code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    offset = self._out_of_range(offset)
                    continue
                if code not in RETRIABLE:
                    raise KafkaClientError(f"Fetch {self.tp} at {offset}: {ErrorCode(code).name}",
                                           code)
                failures = self._failed(failures, ErrorCode(code).name)
                leader = self._new_leader(leader, failures)
                continue
            records = fetched.records if fetched.records is not None else b""
            self.bytes_fetched += len(records)
            next_offset = scan_next_offset(records, offset)
            if next_offset == offset:
                failures = self._no_progress(failures, len(records), fetched.high_watermark,
                                             offset)
                if failures < 0:
                    break
                continue
            if next_offset < until:
                try:
                    self._send(leader, next_offset)
                    in_flight = True
                except KafkaClientError:  # sent again, and handled, by the next round
                    pass
            failures = 0
            self._progress_at = time.monotonic()
            next_offset, first = cols.add_records(records, offset, until, fetched.aborted_transactions)
            if first > offset and fetched.log_start_offset > offset:
                report_data_loss(self.fail_on_data_loss,
                                 f"{self.tp}: offsets {offset}..{first - 1} were removed "
                                 f"(log start offset {fetched.log_start_offset}).")
            offset = next_offset
            if cols.num_rows >= self.max_rows or cols.data_bytes >= MAX_ARROW_DATA_BYTES:
                yield record_batch(cols.take(), self.tp.topic, self.tp.partition, self.schema)
        if in_flight:  # the range ended inside the response; drain the pipelined Fetch
            try:
                self.client.receive_fetch(leader)
            except KafkaClientError:
                pass  # the range is read; the connection is closed with the client
        if cols.num_rows:
            yield record_batch(cols.take(), self.tp.topic, self.tp.partition, self.schema)

    def _new_leader(self, leader: int, failures: int) -> int:
        """After an error from `leader`: drop its connection, back off (a dead leader stays
        in the metadata until the controller moves its partitions) and ask who leads."""
        self.client.forget_leader(leader)
        time.sleep(min(self.opts.retry_backoff_ms * failures, 1000) / 1000.0)
        return self.client.leader_for(self.tp)

    def _failed(self, failures: int, why: str) -> int:
        waited_ms = (time.monotonic() - self._progress_at) * 1000
        if waited_ms > self.opts.poll_timeout_ms:
            raise TimeoutError(f"Cannot fetch records of {self.tp} at offset "
                               f"{self.range.from_offset}..{self.range.until_offset - 1} in "
                               f"{self.opts.poll_timeout_ms} milliseconds "
                               f"(kafkaConsumer.pollTimeoutMs; last error: {why})")
        if failures + 1 >= MAX_ATTEMPTS:
            raise KafkaClientError(f"Fetch {self.tp}: {why} after {failures + 1} attempts")
        return failures + 1

    def _no_progress(self, failures: int, size: int, high_watermark: int, offset: int) -> int:
        """A response without one whole batch. Returns the new failure count, -1: give up."""
        if size > 0:  # the next batch is larger than partition_max_bytes
            if self.partition_max_bytes >= MAX_FETCH_BYTES:
                raise KafkaClientError(f"{self.tp}: a batch at {offset} exceeds "
                                       f"{MAX_FETCH_BYTES} bytes")
            self.partition_max_bytes *= 2
            return failures
        if high_watermark <= offset:
            # the planned offsets are beyond the log's end: the partition lost data
            report_data_loss(self.fail_on_data_loss,
                             f"{self.tp}: offsets {offset}..{self.range.until_offset - 1} were "
                             f"planned but the log ends at {high_watermark}.")
            return -1
        return self._failed(failures, f"no records at {offset} below {high_watermark}")

    def _out_of_range(self, offset: int) -> int:
        earliest = self.client.list_offsets({self.tp: -2})[self.tp]
        if offset < earliest:
            report_data_loss(self.fail_on_data_loss,
                             f"{self.tp}: offsets {offset}..{earliest - 1} were removed "
                             f"(log start offset {earliest}).")
            return min(earliest, self.range.until_offset)
        latest = self.client.list_offsets({self.tp: -1}, self.opts.isolation_level)[self.tp]
        report_data_loss(self.fail_on_data_loss,
                         f"{self.tp}: offset {offset} is past the log end {latest}.")
        return self.range.until_offset
