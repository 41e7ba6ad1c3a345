"""Group coordination (classic protocol), committed offsets in __consumer_offsets, producer ids."""
