"""Cluster mode over ZooKeeper (docs/cluster.md). Nothing here is imported unless
`zookeeper.connect` is set or a cluster tool runs.

    zookeeper_server.py    a real ZooKeeper (Debian's package) for local clusters and tests
    zookeeper_ensemble.py  several of them as one ensemble (tests that lose a ZooKeeper)
"""
