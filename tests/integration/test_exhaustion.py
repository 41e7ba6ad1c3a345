"""Running out of descriptors is never a half state; max.broker.partitions (KIP-578).

The running broker's open-file limit is lowered (prlimit) to just above what it uses
and more clients connect than it can accept. A CreateTopics sent on a connection
opened before is still answered, with success or an error naming the cause, and the
topic exists whole or not at all, in Metadata and on disk. Accepting pauses (logged,
not per attempt) and resumes by itself once the extra connections close.
"""

from __future__ import annotations

import os
import resource
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.api_versions import ApiVersionsRequest
from kbroker.protocol.messages.create_topics import CreateTopicsRequest
from kbroker.protocol.messages.metadata import MetadataRequest

from .wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def create_request(name: str, partitions: int) -> CreateTopicsRequest:
    topic = CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1,
                                               assignments=[], configs=[])
    return CreateTopicsRequest(topics=[topic], timeout_ms=30000)


def test_running_out_of_descriptors_is_never_a_half_state(broker_factory: Any) -> None:
    broker = broker_factory({"num.partitions": "1"}).start()
    pid = broker.proc.pid
    before = WireClient(broker.bootstrap_servers, timeout=30)  # opened before the squeeze
    before.call(ApiVersionsRequest(), 0)
    hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)[1]
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (descriptors(pid) + 8, hard))
    extra = [socket.create_connection(("127.0.0.1", int(broker.bootstrap_servers.rsplit(":", 1)[1])))
             for _ in range(30)]
    try:
        deadline = time.monotonic() + 20
        while "pausing accepts" not in broker.output():
            assert time.monotonic() < deadline, "the broker never ran out of descriptors"
            time.sleep(0.05)
        result = before.call(create_request("squeezed", 200), 4).topics[0]
        assert result.error_code in (ErrorCode.NONE, ErrorCode.KAFKA_STORAGE_ERROR), result
        if result.error_code:
            assert "Too many open files" in (result.error_message or "")
        md = before.call(MetadataRequest(topics=None), 9)
        listed = {t.name: len(t.partitions) for t in md.topics}
        on_disk = len([d for d in broker.log_dir.iterdir() if d.name.startswith("squeezed-")])
        if result.error_code:
            assert "squeezed" not in listed and on_disk == 0, (listed, on_disk)
        else:
            assert listed["squeezed"] == 200 == on_disk
    finally:
        for s in extra:
            s.close()
    # Accepting resumes by itself: a new client is served without a restart.
    deadline = time.monotonic() + 30
    while True:
        try:
            with WireClient(broker.bootstrap_servers, timeout=5) as c:
                c.call(ApiVersionsRequest(), 0)
            break
        except OSError:
            assert time.monotonic() < deadline, "accepting never resumed"
            time.sleep(0.1)
    assert broker.output().count("pausing accepts") <= 3  # once per interval, not per attempt
    before.close()


def test_max_broker_partitions(broker_factory: Any, tmp_path: Path) -> None:
    broker = broker_factory({"max.broker.partitions": "10"}).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic("six", 6, 1)])["six"].result(30)
    with pytest.raises(Exception) as e:
        admin.create_topics([NewTopic("five", 5, 1)])["five"].result(30)
    err = e.value.args[0]
    assert err.code() == KafkaError.POLICY_VIOLATION and "max.broker.partitions" in err.str()
    admin.create_partitions([NewPartitions("six", 10)])["six"].result(30)
    with pytest.raises(Exception) as e:
        admin.create_partitions([NewPartitions("six", 11)])["six"].result(30)
    assert e.value.args[0].code() == KafkaError.POLICY_VIOLATION
    md = admin.list_topics(timeout=10)
    assert "five" not in md.topics and len(md.topics["six"].partitions) == 10


def test_running_out_of_descriptors_on_append_keeps_the_dir_online(kbroker_broker: Any) -> None:
    """EMFILE while opening a segment to append fails that Produce only: the process ran out
    of descriptors, the disk did not fail (the log dir stays online)."""
    import errno as errno_

    state = kbroker_broker.state
    state_loop = kbroker_broker._loop
    import asyncio

    async def run() -> tuple[int, bool]:
        state.create_topic("few", 1)
        log = state.get_log("few", 0)
        seg = log.segments.active
        seg.release_files()
        real_open = os.open

        def no_descriptors(*args: Any, **kw: Any) -> int:
            raise OSError(errno_.EMFILE, "Too many open files")

        os.open = no_descriptors  # type: ignore[assignment]
        try:
            from tests.batches import values_batch

            try:
                log.append_as_leader(values_batch(1))
                code = 0
            except Exception as e:
                code = getattr(e, "error_code", -1)
        finally:
            os.open = real_open  # type: ignore[assignment]
        return code, state.log_manager.is_offline(log.topic_partition)

    code, offline = asyncio.run_coroutine_threadsafe(run(), state_loop).result(30)
    assert code == ErrorCode.KAFKA_STORAGE_ERROR and not offline
