"""IncrementalAlterConfigs and AlterConfigs on the controller; ConfigRecords in the image."""

from __future__ import annotations

from controller_harness import Harness
from kio.schema.alter_configs.v0.request import AlterableConfig as LegacyConfig
from kio.schema.alter_configs.v0.request import AlterConfigsRequest as Legacy
from kio.schema.alter_configs.v0.request import AlterConfigsResource as LegacyResource
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)

TOPIC, BROKER = 2, 4


def _inc(h: Harness, rtype: int, name: str, *ops: tuple[str, int, str | None], validate: bool = False) -> ErrorCode:
    req = IncrementalAlterConfigsRequest(
        resources=(
            AlterConfigsResource(
                resource_type=rtype,
                resource_name=name,
                configs=tuple(AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops),
            ),
        ),
        validate_only=validate,
    )
    return h.run(req).responses[0].error_code


def test_incremental_operations(h: Harness) -> None:
    h.start_brokers(1)
    h.create("t")
    assert _inc(h, TOPIC, "t", ("retention.ms", 0, "1000"), ("cleanup.policy", 2, "delete")) == ErrorCode.none
    assert h.image().configs[(TOPIC, "t")] == {"retention.ms": "1000", "cleanup.policy": "delete"}
    assert _inc(h, TOPIC, "t", ("cleanup.policy", 2, "compact")) == ErrorCode.none
    assert h.image().configs[(TOPIC, "t")]["cleanup.policy"] == "delete,compact"
    assert _inc(h, TOPIC, "t", ("cleanup.policy", 3, "delete"), ("retention.ms", 1, None)) == ErrorCode.none
    assert h.image().configs[(TOPIC, "t")] == {"cleanup.policy": "compact"}
    assert _inc(h, TOPIC, "t", ("x", 0, "1"), validate=True) == ErrorCode.none
    assert "x" not in h.image().configs[(TOPIC, "t")]
    # configs go with the topic
    h.delete("t")
    assert (TOPIC, "t") not in h.image().configs


def test_config_validation(h: Harness) -> None:
    h.start_brokers(1)
    assert _inc(h, TOPIC, "missing", ("a", 0, "1")) == ErrorCode.unknown_topic_or_partition
    assert _inc(h, 99, "x", ("a", 0, "1")) == ErrorCode.invalid_request
    assert _inc(h, BROKER, "abc", ("a", 0, "1")) == ErrorCode.invalid_request
    assert _inc(h, BROKER, "", ("a", 0, "1"), ("a", 0, "2")) == ErrorCode.invalid_request
    assert _inc(h, BROKER, "", ("a", 0, None)) == ErrorCode.invalid_request
    assert _inc(h, BROKER, "", ("log.retention.ms", 0, "5")) == ErrorCode.none
    assert _inc(h, BROKER, "1", ("log.retention.ms", 0, "6")) == ErrorCode.none
    assert h.image().configs[(BROKER, "")] == {"log.retention.ms": "5"}
    assert h.image().configs[(BROKER, "1")] == {"log.retention.ms": "6"}


def test_legacy_alter_replaces_the_whole_set(h: Harness) -> None:
    h.start_brokers(1)
    h.create("t")
    _inc(h, TOPIC, "t", ("a", 0, "1"), ("b", 0, "2"))
    req = Legacy(
        resources=(
            LegacyResource(resource_type=TOPIC, resource_name="t", configs=(LegacyConfig(name="b", value="3"),)),
        ),
        validate_only=False,
    )
    assert h.run(req).responses[0].error_code == ErrorCode.none
    assert h.image().configs[(TOPIC, "t")] == {"b": "3"}
