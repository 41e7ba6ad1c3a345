"""Command-line tools that talk to a broker over the Kafka protocol (topics, groups), and
`kbroker trace`, which reads a broker's protocol trace (trace.py)."""
