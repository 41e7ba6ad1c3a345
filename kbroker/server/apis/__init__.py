"""One module per Kafka API family; each has handle(ctx, request) (see api_table)."""
