"""A `kbroker serve` process SIGKILLed with transactions in every state comes back to a
consistent outcome: committed stays committed, aborted stays aborted (the .txnindex and
the LSO survive), an open transaction stays open and can still commit, an abandoned one
is aborted once its timeout passes, and one caught between PrepareCommit/PrepareAbort and
its markers is completed by the coordinator when it loads the transaction log."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.common.topic_partition import TopicPartition
from kbroker.coordinator.transaction_topic import TRANSACTION_STATE_TOPIC_NAME
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from kbroker.utils.java_hash import java_abs, java_string_hash
from kbroker.utils.time import SYSTEM_TIME

from .conftest import BrokerProcess
from .txn_support import offsets, read_values, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

OVERRIDES = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200", "num.partitions": "1",
             "transaction.state.log.num.partitions": "5"}


def create(bs: str, *topics: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(t, partitions, 1) for t in topics]).values():
        f.result(30)


def producer(bs: str, transactional_id: str, **conf: object) -> Producer:
    p = Producer({"bootstrap.servers": bs, "transactional.id": transactional_id, "linger.ms": 0, **conf})
    p.init_transactions(30)
    return p


def txn_index_files(log_dir: Path, topic: str) -> list[str]:
    return sorted(n for n in os.listdir(log_dir / f"{topic}-0") if n.endswith(".txnindex"))


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM])
def test_every_state_survives_a_restart(broker_factory: type[BrokerProcess], tmp_path: Path,
                                        stop: signal.Signals) -> None:
    broker = broker_factory(OVERRIDES).start()
    bs = broker.bootstrap_servers
    create(bs, "settled", "open", "abandoned")
    committer = producer(bs, "committer")
    committer.begin_transaction()
    committer.produce("settled", b"committed-1")
    committer.commit_transaction(30)                        # CompleteCommit
    aborter = producer(bs, "aborter")
    aborter.begin_transaction()
    aborter.produce("settled", b"aborted")
    aborter.flush(30)
    aborter.abort_transaction(30)                           # CompleteAbort, a .txnindex entry
    idle = producer(bs, "idle")                             # Empty
    opener = producer(bs, "opener")
    opener.begin_transaction()
    opener.produce("open", b"open-1")
    opener.flush(30)                                        # Ongoing, long timeout
    leaver = producer(bs, "leaver", **{"transaction.timeout.ms": 3000})
    leaver.begin_transaction()
    leaver.produce("abandoned", b"abandoned")
    leaver.flush(30)                                        # Ongoing, gives up
    assert offsets(bs, "open") == (0, 1)
    assert txn_index_files(broker.log_dir, "settled")
    broker.signal(stop)
    broker.wait(30)
    broker.overrides["listeners"] = f"PLAINTEXT://{bs}"    # the clients' bootstrap address
    broker.start()
    assert broker.bootstrap_servers == bs
    assert offsets(bs, "open") == (0, 1)                    # the LSO survived
    assert read_values(bs, "settled") == [b"committed-1"]   # the abort survived (.txnindex)
    assert read_values(bs, "settled", isolation="read_uncommitted") == [b"committed-1", b"aborted"]
    wait_until(lambda: offsets(bs, "abandoned") == (2, 2), "the abandoned transaction's abort")
    assert read_values(bs, "abandoned") == []
    # the coordinator reloaded every id: each producer carries on (librdkafka reconnects)
    opener.produce("open", b"open-2")
    opener.commit_transaction(30)
    assert read_values(bs, "open") == [b"open-1", b"open-2"]
    for p, value in ((committer, b"committed-2"), (idle, b"committed-3")):
        p.begin_transaction()
        p.produce("settled", value)
        p.commit_transaction(30)
    assert read_values(bs, "settled") == [b"committed-1", b"committed-2", b"committed-3"]


def truncate_last_batch(manager: LogManager, tp: TopicPartition) -> None:
    plog = manager.get_log(tp)
    assert plog is not None
    plog.truncate_to(plog.log_end_offset - 1)


@pytest.mark.parametrize("commit", [True, False])
def test_prepared_transaction_is_completed_after_restart(broker_factory: type[BrokerProcess],
                                                         commit: bool) -> None:
    """The state a coordinator leaves when it is SIGKILLed after writing PrepareCommit (or
    PrepareAbort) and the marker of one partition, before the other's and before
    CompleteCommit: made by cutting those records off the logs of the killed broker
    (which then starts as after a crash, recovering its logs)."""
    broker = broker_factory(OVERRIDES).start()
    bs = broker.bootstrap_servers
    create(bs, "prepared", partitions=2)
    p = producer(bs, "preparer")
    p.begin_transaction()
    p.produce("prepared", b"p0", partition=0)
    p.produce("prepared", b"p1", partition=1)
    p.flush(30)
    if commit:
        p.commit_transaction(30)
    else:
        p.abort_transaction(30)
    # EndTxn is answered once PrepareCommit/PrepareAbort is written; the markers and
    # CompleteCommit/CompleteAbort follow (as in Kafka). A single broker writes them in
    # one step, so both markers visible means the last record of the transaction log is
    # the Complete one that is cut off below.
    wait_until(lambda: offsets(bs, "prepared", 0) == (2, 2) and offsets(bs, "prepared", 1) == (2, 2),
               "the markers before the kill")
    broker.kill()
    manager = LogManager([str(broker.log_dir)], LogConfig(), SYSTEM_TIME)
    manager.startup()
    try:
        txn_partition = java_abs(java_string_hash("preparer")) % 5
        truncate_last_batch(manager, TopicPartition(TRANSACTION_STATE_TOPIC_NAME, txn_partition))
        truncate_last_batch(manager, TopicPartition("prepared", 1))   # its marker never written
    finally:
        manager.shutdown()
    os.unlink(broker.log_dir / CLEAN_SHUTDOWN_FILE)  # as the SIGKILL left it: recovery at start
    broker.overrides["listeners"] = f"PLAINTEXT://{bs}"
    broker.start()
    expected = ([b"p0"], [b"p1"]) if commit else ([], [])
    # prepared-1 gets its marker; prepared-0 a second one, which ends nothing
    wait_until(lambda: offsets(bs, "prepared", 0) == (3, 3) and offsets(bs, "prepared", 1) == (2, 2),
               "the markers")
    for partition in (0, 1):
        assert read_values(bs, "prepared", partition) == list(expected[partition])
    p.begin_transaction()  # the coordinator completed the transaction: the producer goes on
    p.produce("prepared", b"next", partition=1)
    p.commit_transaction(30)
    assert read_values(bs, "prepared", 1)[-1] == b"next"
