from pathlib import Path

import pytest

from schedulerd import config
from schedulerd.errors import ConfigError

REPO_CONFIG = Path(__file__).resolve().parents[2] / "config.toml"


def test_shipped_config_matches_the_defaults() -> None:
    """config.toml documents every setting with its default value."""
    assert config.load(REPO_CONFIG, environ={}) == config.Config()


def test_every_setting_is_in_the_shipped_file() -> None:
    import tomllib
    from typing import get_type_hints

    document = tomllib.loads(REPO_CONFIG.read_text())
    for section, section_cls in get_type_hints(config.Config).items():
        assert set(document[section]) == set(get_type_hints(section_cls)), section


def test_environment_overrides_file(tmp_path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[redis]\nprefix = "from-file"\n[worker]\nconcurrency = 3\n')
    loaded = config.load(path, environ={"SCHEDULERD_REDIS_PREFIX": "from-env", "SCHEDULERD_DAEMON_ROLES": "worker,sweeper",
                                        "SCHEDULERD_DAEMON_MIGRATE_ON_START": "false"})
    assert loaded.redis.prefix == "from-env"
    assert loaded.worker.concurrency == 3
    assert loaded.daemon.roles == ("worker", "sweeper")
    assert loaded.daemon.migrate_on_start is False


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"SCHEDULERD_WORKER_CONCURRENCY": "many"}, "worker.concurrency = 'many' is not a valid int"),
        ({"SCHEDULERD_DAEMON_MIGRATE_ON_START": "perhaps"}, "daemon.migrate_on_start"),
        ({"SCHEDULERD_WORKER_HEARTBEAT_S": "20"}, "heartbeat_s"),
        ({"SCHEDULERD_DAEMON_ROLES": "worker,janitor"}, "unknown role"),
        ({"SCHEDULERD_WORKER_LINGER_BUSY_S": "2"}, r"worker.linger_busy_s must be between 0 and 1 second, got 2"),
        ({"SCHEDULERD_WORKER_LINGER_S": "-0.1"}, r"worker.linger_s must be between 0 and 1 second, got -0.1"),
        ({"SCHEDULERD_DATABASE_STATEMENT_TIMEOUT_S": "0"}, r"database.statement_timeout_s must be between 1 and 3600, got 0"),
    ],
)
def test_bad_values_name_the_setting(environ, message, tmp_path) -> None:
    with pytest.raises(ConfigError, match=message):
        config.load(tmp_path / "absent.toml", environ=environ)


def test_unknown_keys_are_refused(tmp_path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[worker]\nconcurency = 3\n")
    with pytest.raises(ConfigError, match=r"unknown setting\(s\) in \[worker\]: concurency"):
        config.load(path, environ={})


def test_task_limits_from_file_and_environment(tmp_path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[worker]\ntask_concurrency = { sleep = 4, "my.report" = 1 }\nslow_tasks = ["my.report"]\n')
    loaded = config.load(path, environ={})
    assert loaded.worker.task_concurrency == {"sleep": 4, "my.report": 1}
    assert loaded.worker.slow_tasks == ("my.report",)
    from_env = config.load(path, environ={"SCHEDULERD_WORKER_TASK_CONCURRENCY": '{"http": 8}'})
    assert from_env.worker.task_concurrency == {"http": 8}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('{"sleep": "four"}', r"worker.task_concurrency = \{'sleep': 'four'\} is not a valid table of integers"),
        ("[1]", "is not a valid table of integers"),
        ('{"sleep": 0}', r"worker.task_concurrency\['sleep'\] must be at least 1"),
    ],
)
def test_bad_task_limits_name_the_setting(value, message, tmp_path) -> None:
    with pytest.raises(ConfigError, match=message):
        config.load(tmp_path / "absent.toml", environ={"SCHEDULERD_WORKER_TASK_CONCURRENCY": value})
