"""Where the doors find their servers: the configured URLs, or the embedded servers named in
[embedded].data_dir, and a message that says what to do when neither is there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from schedulerd import config as config_module
from schedulerd import servers
from schedulerd.errors import ConfigError


def test_configured_urls_are_used_as_they_are(tmp_path: Path) -> None:
    config = config_module.load(tmp_path / "none.toml", {
        "SCHEDULERD_DATABASE_URL": "postgresql://db/x", "SCHEDULERD_REDIS_URL": "redis://r/0",
    })  # fmt: skip
    found = servers.resolve(config)
    assert (found.database_url, found.redis_url) == ("postgresql://db/x", "redis://r/0")


def test_no_servers_names_the_folder_and_the_two_export_lines(tmp_path: Path) -> None:
    """An application's folder is not where `schedulerd run` keeps its embedded servers: the
    message says where it looked and how to point at a daemon's servers from anywhere."""
    app = tmp_path / "app"
    config = config_module.load(tmp_path / "none.toml", {"SCHEDULERD_EMBEDDED_DATA_DIR": str(app / ".schedulerd")})
    with pytest.raises(ConfigError) as refused:
        servers.resolve(config)
    message = str(refused.value)
    assert f"no embedded servers run in {app / '.schedulerd'}" in message
    assert "export SCHEDULERD_DATABASE_URL=" in message and "export SCHEDULERD_REDIS_URL=" in message


@pytest.mark.parametrize(
    ("environ", "unset"),
    [
        ({}, "no database and no Redis configured"),
        ({"SCHEDULERD_DATABASE_URL": "postgresql://db/x"}, "no Redis configured"),
        ({"SCHEDULERD_REDIS_URL": "redis://r/0"}, "no database configured"),
    ],
)
def test_the_message_names_the_url_that_is_unset(environ: dict[str, str], unset: str, tmp_path: Path) -> None:
    environ = {"SCHEDULERD_EMBEDDED_DATA_DIR": str(tmp_path / ".schedulerd"), **environ}
    with pytest.raises(ConfigError) as refused:
        servers.resolve(config_module.load(tmp_path / "none.toml", environ))
    assert str(refused.value).startswith(f"{unset}, and no embedded servers run in")


def test_a_stale_state_file_is_not_taken_for_running_servers(tmp_path: Path) -> None:
    data_dir = tmp_path / ".schedulerd"
    data_dir.mkdir()
    (data_dir / "embedded.json").write_text(json.dumps({
        "database_url": "postgresql://gone", "redis_url": "redis://gone", "postgres_pid": 2**22 + 1, "redis_pid": 2**22 + 2,
    }))  # fmt: skip
    config = config_module.load(tmp_path / "none.toml", {"SCHEDULERD_EMBEDDED_DATA_DIR": str(data_dir)})
    with pytest.raises(ConfigError, match="export SCHEDULERD_REDIS_URL"):
        servers.resolve(config)


def test_the_producer_library_does_not_import_the_loops() -> None:
    """`from schedulerd import Client` brings in the connect, not the modules that build and run loops."""
    from tests.unit.test_layout import IMPORTS

    seen, todo = set(), ["schedulerd.client"]
    while todo:
        name = todo.pop()
        if name not in seen and name in IMPORTS:
            seen.add(name)
            todo.extend(IMPORTS[name])
    assert "schedulerd.servers" in seen
    assert not {"schedulerd.daemon", "schedulerd.worker", "schedulerd.materialiser", "schedulerd.api"} & seen
