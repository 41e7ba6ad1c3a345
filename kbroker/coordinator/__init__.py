"""Group coordination (classic protocol) with committed offsets in __consumer_offsets,
transaction coordination with transactional ids in __transaction_state, producer ids."""
