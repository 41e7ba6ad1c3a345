"""Command-line tools that talk to a broker over the Kafka protocol."""
