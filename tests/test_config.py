"""Config: found once at the entry point, validated strictly, paths relative to the file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from shared.config import AppConfig, build_config, load_config
from shared.errors import ConfigError

BIN = Path(sys.executable).parent


def test_defaults_without_any_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config(env={})
    assert config.source is None
    assert config.storage.data_dir == tmp_path / "data"
    assert config.memory.recall_top_k == 5 and config.memory.recall_max_k == 15
    assert config.server.exposed_tools == ("memorize", "recall", "list_memories", "edit_memory")


def test_lookup_order(tmp_path, monkeypatch):
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    (tmp_path / "cwd" / "config.yaml").write_text("memory:\n  recall_top_k: 3\n")
    (tmp_path / "env.yaml").write_text("memory:\n  recall_top_k: 4\n")
    (tmp_path / "explicit.yaml").write_text("memory:\n  recall_top_k: 6\n")
    assert load_config(env={}).memory.recall_top_k == 3
    assert load_config(env={"AOKUN_CONFIG": str(tmp_path / "env.yaml")}).memory.recall_top_k == 4
    assert load_config(tmp_path / "explicit.yaml",
                       env={"AOKUN_CONFIG": str(tmp_path / "env.yaml")}).memory.recall_top_k == 6


def test_relative_paths_resolve_against_the_config_folder(tmp_path, monkeypatch):
    (tmp_path / "conf").mkdir()
    path = tmp_path / "conf" / "aokun.yaml"
    path.write_text("storage:\n  data_dir: mydata\n")
    monkeypatch.chdir("/")
    assert load_config(path, env={}).storage.data_dir == tmp_path / "conf" / "mydata"


def test_example_config_is_valid_and_matches_defaults(tmp_path):
    example = Path(__file__).parent.parent / "config.example.yaml"
    config = load_config(example, env={})
    defaults = build_config({}, example.parent)
    assert config.storage == defaults.storage
    assert (config.text, config.server, config.memory, config.worker) == (
        defaults.text, defaults.server, defaults.memory, defaults.worker)


def test_every_option_is_documented_in_the_example():
    import dataclasses

    import yaml

    example = yaml.safe_load((Path(__file__).parent.parent / "config.example.yaml").read_text())
    for section in dataclasses.fields(AppConfig):
        if section.name == "source":
            continue
        keys = {f.name for f in dataclasses.fields(section.default_factory)}
        assert set(example[section.name]) == keys, section.name


@pytest.mark.parametrize("raw, message", [
    ({"stroage": {}}, "unknown config section 'stroage'"),
    ({"storage": {"datadir": "x"}}, "unknown config key storage.datadir; allowed: data_dir"),
    ({"server": {"port": 70000}}, "server.port must be <= 65535"),
    ({"server": {"port": "80"}}, "server.port must be an integer"),
    ({"server": {"transport": "grpc"}}, "server.transport must be one of stdio, http"),
    ({"server": {"exposed_tools": ["memorize", "forget"]}}, "unknown value(s) forget"),
    ({"server": {"exposed_tools": "memorize"}}, "server.exposed_tools must be a list of strings"),
    ({"memory": {"recall_top_k": 20}}, "must not exceed memory.recall_max_k"),
    ({"storage": {"synchronous": "off"}}, "storage.synchronous must be one of full, normal"),
    ({"storage": "data"}, "config section 'storage' must be a mapping"),
])
def test_bad_values_name_the_key(raw, message, tmp_path):
    with pytest.raises(ConfigError) as err:
        build_config(raw, tmp_path)
    assert message in str(err.value)


def test_server_refuses_to_start_on_bad_config(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("server:\n  prot: 8000\n")
    run = subprocess.run([BIN / "aokun-server", "--config", path], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 2
    assert "unknown config key server.prot" in run.stderr


def test_admin_cli_takes_config_before_or_after_the_subcommand(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("storage:\n  data_dir: elsewhere\n")
    for args in (["--config", path, "config"], ["config", "--config", path]):
        run = subprocess.run([BIN / "aokun", *args], capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        assert str(tmp_path / "elsewhere") in run.stdout
    env_run = subprocess.run([BIN / "aokun", "stats"], capture_output=True, text=True, timeout=60,
                             env={"AOKUN_CONFIG": str(path), "PATH": "/usr/bin:/bin"}, cwd="/")
    assert env_run.returncode == 0, env_run.stderr
    assert '"total": 0' in env_run.stdout
    assert (tmp_path / "elsewhere" / "aokun.db").exists()
