"""The network server: listeners, connections, in-order responses, API dispatch."""
