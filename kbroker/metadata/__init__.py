"""Cluster and topic metadata owned by the Broker."""
