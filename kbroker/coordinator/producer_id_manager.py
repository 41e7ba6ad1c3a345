"""ProducerIdManager: hands out producer ids, never the same one twice, even after a crash.

Ids come from blocks of PRODUCER_ID_BLOCK_SIZE (as Kafka's ProducerIdManager). The
end of the current block is written (atomically: temp file, fsync, rename) before
any id of the block is handed out, so after a restart allocation resumes at the
next block and no id repeats. File, in the first log dir:

    kbroker-producer-id-block      one line: "version=1 block_end=<exclusive end>"

Lock: the broker's event-loop thread only. Invariant: next_id < block_end is a
never-issued id and block_end is on disk.
"""

from __future__ import annotations

import os

from kbroker.utils.atomic_file import write_atomically

PRODUCER_ID_BLOCK_FILE = "kbroker-producer-id-block"
PRODUCER_ID_BLOCK_SIZE = 1000
MAX_EPOCH = 32767


class ProducerIdManager:
    def __init__(self, log_dir: str) -> None:
        self.path = os.path.join(log_dir, PRODUCER_ID_BLOCK_FILE)
        self.next_id = self._read_block_end()
        self.block_end = self.next_id

    def _read_block_end(self) -> int:
        try:
            with open(self.path, encoding="ascii") as f:
                fields = dict(part.split("=", 1) for part in f.read().split())
        except FileNotFoundError:
            return 0
        if fields.get("version") != "1":
            raise ValueError(f"{self.path}: unknown version {fields.get('version')}")
        return int(fields["block_end"])

    def generate(self) -> int:
        if self.next_id >= self.block_end:
            end = self.next_id + PRODUCER_ID_BLOCK_SIZE
            write_atomically(self.path, f"version=1 block_end={end}\n".encode())
            self.block_end = end
        pid = self.next_id
        self.next_id += 1
        return pid
