"""The API version ranges a node advertises in ApiVersions, by role: what its controllers and its
brokers serve (the process registers its handlers with these; the simulators' clients draw the
versions they send from them, as Kafka's clients negotiate a version in the range).
"""

from __future__ import annotations

CONTROLLER_API_VERSIONS: dict[str, tuple[int, int, int]] = {  # name: (api key, min version, max version)
    "BrokerRegistration": (62, 0, 4),
    "BrokerHeartbeat": (63, 0, 1),
    "UnregisterBroker": (64, 0, 0),
    "CreateTopics": (19, 2, 7),
    "DeleteTopics": (20, 1, 6),
    "AlterPartition": (56, 2, 3),
    "AlterPartitionReassignments": (45, 0, 0),
    "ListPartitionReassignments": (46, 0, 0),
    "ElectLeaders": (43, 0, 2),
    "IncrementalAlterConfigs": (44, 0, 1),
    "AlterConfigs": (33, 0, 2),
    "CreateAcls": (30, 1, 3),
    "DeleteAcls": (31, 1, 3),
    "AlterUserScramCredentials": (51, 0, 0),
    "CreatePartitions": (37, 0, 3),
    "AlterClientQuotas": (49, 0, 1),
    "AllocateProducerIds": (67, 0, 0),
    "CreateDelegationToken": (38, 1, 3),
    "RenewDelegationToken": (39, 1, 2),
    "ExpireDelegationToken": (40, 1, 2),
}
ENVELOPE_API_VERSIONS = (58, 0, 0)
"""Brokers forward the token APIs in an Envelope, with their client's principal (node.protocol.envelope)."""
CONTROLLER_READ_API_VERSIONS: dict[str, tuple[int, int, int]] = {  # answered from the committed image
    "DescribeAcls": (29, 1, 3),
}
# The flexible versions too (node.protocol skips unknown tagged fields and trailing bytes, as Kafka
# does): today's Kafka's ranges, DescribeCluster v2 (fenced brokers on request) included. Metadata
# goes up to v12 as Kafka 3.x's does: librdkafka sizes its parse buffer at four times the response's
# wire length, which at v9 (no topic ids) is too small for short topic names with one replica — it
# refused a list of ten such topics ("tmpabuf memory shortage"); at v10+ each topic's 16-byte id
# leaves it room, as against Kafka. Wireshark 4.0's dissector stops at v9 (tests/node/test_e2e_tshark.py
# judges the versions it knows).
BROKER_API_VERSIONS: dict[str, tuple[int, int, int]] = {
    "Metadata": (3, 0, 12),
    "DescribeCluster": (60, 0, 2),
    "CreateTopics": (19, 2, 7),
    "DeleteTopics": (20, 1, 6),
    "DescribeConfigs": (32, 1, 4),
    "AlterConfigs": (33, 0, 2),
    "IncrementalAlterConfigs": (44, 0, 1),
    "CreateAcls": (30, 1, 3),
    "DeleteAcls": (31, 1, 3),
    "DescribeAcls": (29, 1, 3),
    "AlterUserScramCredentials": (51, 0, 0),
    "DescribeUserScramCredentials": (50, 0, 0),
    "CreatePartitions": (37, 0, 3),
    "AlterClientQuotas": (49, 0, 1),
    "DescribeClientQuotas": (48, 0, 1),
    "InitProducerId": (22, 0, 4),
    # the data plane (node.broker.replication): Fetch up to v12, the last version naming topics
    "Produce": (0, 3, 9),
    "Fetch": (1, 4, 12),
    "ListOffsets": (2, 1, 7),
    "OffsetForLeaderEpoch": (23, 2, 4),
}
TOKEN_FORWARDED_API_VERSIONS: dict[str, tuple[int, int, int]] = {  # to the active controller in an Envelope
    "CreateDelegationToken": (38, 1, 3),
    "RenewDelegationToken": (39, 1, 2),
    "ExpireDelegationToken": (40, 1, 2),
}
TOKEN_READ_API_VERSIONS = (41, 1, 3)
"""DescribeDelegationToken, answered by brokers from their image."""
RELAYED_API_VERSIONS: dict[str, tuple[int, int, int]] = {  # served by brokers by asking the active controller
    "DescribeQuorum": (55, 1, 1),  # the version node.raft.wire maps
    "UnregisterBroker": (64, 0, 0),
}
