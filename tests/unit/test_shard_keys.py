"""Which shard an execution's entry lives in, and the shards' hash tags (pure: no Redis)."""

import uuid
import zlib

import pytest

from schedulerd.config import load
from schedulerd.errors import ConfigError
from schedulerd.queue import shard_of, shard_tags


def test_the_shard_is_crc32_of_the_canonical_id_and_the_same_for_text_and_uuid() -> None:
    execution_id = uuid.UUID("018f0000-0000-8000-8000-000000000001")
    assert shard_of(execution_id, 32) == shard_of(str(execution_id), 32) == zlib.crc32(str(execution_id).encode()) % 32 == 10
    assert shard_of(execution_id, 1) == 0


def test_ids_spread_evenly_over_the_shards() -> None:
    counts = [0] * 32
    for _ in range(32_000):
        counts[shard_of(uuid.uuid4(), 32)] += 1
    assert min(counts) > 800 and max(counts) < 1200  # 1,000 each, give or take a few sigma


def test_one_shard_keeps_the_one_slot_tag_and_more_get_one_tag_each() -> None:
    assert shard_tags("sd", 1) == ["{sd}"]
    assert shard_tags("sd", 3) == ["{sd:0}", "{sd:1}", "{sd:2}"]


@pytest.mark.parametrize("value", ["0", "1025", "-1"])
def test_a_shard_count_out_of_range_is_refused(tmp_path, value: str) -> None:
    with pytest.raises(ConfigError, match="redis.shards"):
        load(tmp_path / "none.toml", {"SCHEDULERD_REDIS_SHARDS": value})


def test_shards_and_cluster_come_from_the_environment(tmp_path) -> None:
    config = load(tmp_path / "none.toml", {"SCHEDULERD_REDIS_SHARDS": "32", "SCHEDULERD_REDIS_CLUSTER": "true"})
    assert (config.redis.shards, config.redis.cluster) == (32, True)
