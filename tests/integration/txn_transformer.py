"""A consume-transform-produce process for the exactly-once tests (run as a script):
reads `--input` with a read_committed consumer of group `--group`, writes each value as
"out-<value>" to the same partition of `--output` and commits the consumed offsets in
the same transaction (send_offsets_to_transaction), `--batch` records a transaction.

`--pause-at N`: in transaction N, after its records are written and its offsets sent,
print "paused" and wait on stdin forever (the test SIGKILLs it there). Otherwise it exits
0 once its position reached the end of every input partition. Prints "committed <n>"
after each commit."""

from __future__ import annotations

import argparse
import sys

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("bootstrap", "input", "output", "group", "transactional-id"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--pause-at", type=int, default=-1)
    args = parser.parse_args()
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": args.group,
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                         "enable.partition.eof": True})
    producer = Producer({"bootstrap.servers": args.bootstrap, "transactional.id": args.transactional_id,
                         "linger.ms": 5})
    producer.init_transactions(60)
    consumer.subscribe([args.input])
    eof: set[int] = set()
    txn = 0
    while True:
        messages = consumer.consume(args.batch, 1.0)
        records = []
        for m in messages:
            err = m.error()
            if err is None:
                records.append(m)
                eof.discard(m.partition())
            elif err.code() == KafkaError._PARTITION_EOF:
                eof.add(m.partition())
            else:
                print(f"consumer error: {err}", file=sys.stderr, flush=True)
        assignment = consumer.assignment()
        if not records:
            if assignment and eof >= {tp.partition for tp in assignment}:
                return 0
            continue
        producer.begin_transaction()
        for m in records:
            producer.produce(args.output, b"out-" + m.value(), partition=m.partition())
        positions = consumer.position(assignment)
        producer.send_offsets_to_transaction(
            [TopicPartition(tp.topic, tp.partition, tp.offset) for tp in positions if tp.offset >= 0],
            consumer.consumer_group_metadata(), 60)
        if txn == args.pause_at:
            producer.flush(60)
            print("paused", flush=True)
            sys.stdin.readline()
        producer.commit_transaction(60)
        txn += 1
        print(f"committed {txn}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
