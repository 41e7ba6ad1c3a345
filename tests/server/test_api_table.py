"""The handler tables against the generated codecs (issue #36).

Every advertised (key, version) has a request and a response codec; no version a spec
marks latestVersionUnstable is advertised; every key has a handler; the ranges kept
below Kafka 4.x's maxima stay where api_table's docstring says (clients infer the
broker version from maxima, and Produce v13 / Fetch v13+ need topic ids). That the
single-broker table is exactly the ApiVersions answer is tests/integration/test_wire.py's
test_api_versions_advertises_only_implemented_apis, over a real socket.
"""

from __future__ import annotations

import pytest

from kbroker.protocol import messages
from kbroker.protocol.api_key import UNSTABLE_VERSIONS, VALID_VERSIONS
from kbroker.server.api_table import API_TABLE, CLUSTER_API_TABLE

TABLES = [pytest.param(API_TABLE, id="single"), pytest.param(CLUSTER_API_TABLE, id="cluster")]


@pytest.mark.parametrize("table", TABLES)
def test_every_advertised_version_has_a_codec(table: dict) -> None:
    for key, spec in table.items():
        assert spec.api_key == key
        assert spec.min_version <= spec.max_version
        for codec in (messages.REQUESTS[key], messages.RESPONSES[key]):
            lo, hi = codec.VALID_VERSIONS
            assert lo <= spec.min_version and spec.max_version <= hi, (key, codec.__name__)
        assert VALID_VERSIONS[key][0] <= spec.min_version and spec.max_version <= VALID_VERSIONS[key][1]


@pytest.mark.parametrize("table", TABLES)
def test_no_unstable_version_is_advertised(table: dict) -> None:
    for key, spec in table.items():
        for v in UNSTABLE_VERSIONS.get(key, ()):
            assert not spec.min_version <= v <= spec.max_version, (key, v)
    assert 22 in UNSTABLE_VERSIONS and API_TABLE[22].max_version < min(UNSTABLE_VERSIONS[22])


@pytest.mark.parametrize("table", TABLES)
def test_every_key_has_a_handler(table: dict) -> None:
    for spec in table.values():
        assert callable(spec.handler), spec.api_key


def test_maxima_that_stay_below_kafka_4() -> None:
    # Produce v13 and Fetch v13+ name topics by id; kafka-python reads Produce 13 as a
    # 4.1 broker and ListOffsets 10 as 4.0 (broker_version_data.py): not implemented
    assert API_TABLE[0].max_version == 11 and API_TABLE[0].min_version == 0
    assert API_TABLE[1].max_version == 17
    assert API_TABLE[2].max_version == 7
    assert API_TABLE[22].max_version == 5
    # KIP-890's transaction version 2 (EndTxn 5, TxnOffsetCommit 5-6) is not implemented
    assert API_TABLE[26].max_version == 4 and API_TABLE[28].max_version == 4


def test_removed_apis_only_in_the_cluster_table() -> None:
    for key in (4, 5, 6, 7):  # LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown
        assert key not in API_TABLE
        assert CLUSTER_API_TABLE[key].max_version == VALID_VERSIONS[key][1]


def test_share_group_apis_in_both_tables_and_the_share_coordinator_rpcs_in_the_clusters() -> None:
    """KIP-932: v1 of the heartbeat and describe, v1-2 of ShareFetch and ShareAcknowledge
    (v0, Kafka 4.0's early access, is not served), and the share-group offsets admin APIs
    (90-92), in both modes; the share coordinator's RPCs, which brokers send each other
    (Initialize 83, Read 84, Write 85, Delete 86, ReadSummary 87), in a cluster only."""
    for table in (API_TABLE, CLUSTER_API_TABLE):
        assert [(table[k].min_version, table[k].max_version) for k in (76, 77, 78, 79, 90, 91, 92)] == [
            (1, 1), (1, 1), (1, 2), (1, 2), (0, 1), (0, 0), (0, 0)]
    assert [(CLUSTER_API_TABLE[k].min_version, CLUSTER_API_TABLE[k].max_version) for k in (83, 84, 85, 86, 87)] == [
        (0, 0), (0, 0), (0, 1), (0, 0), (0, 1)]
    assert not {83, 84, 85, 86, 87} & set(API_TABLE)
