"""Config: found once at the entry point, validated strictly, paths relative to the file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers import aokun_in_process
from shared.config import CHANNELS, AppConfig, build_config, load_config, secret
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
    ({"server": {"max_sessions_per_token": 0}}, "server.max_sessions_per_token must be >= 1"),
    ({"server": {"session_idle_timeout_s": 0}}, "server.session_idle_timeout_s must be >= 1.0"),
])
def test_bad_values_name_the_key(raw, message, tmp_path):
    with pytest.raises(ConfigError) as err:
        build_config(raw, tmp_path)
    assert message in str(err.value)


def test_an_empty_channel_list_is_refused_in_one_line(tmp_path):
    # Recall with no channel would answer nothing, for every query, without a word.
    with pytest.raises(ConfigError) as err:
        build_config({"retrieval": {"channels": []}}, tmp_path)
    assert str(err.value) == ("retrieval.channels must name at least one entry of: bm25, vector, "
                              "graph_keyword, graph_vector")
    assert build_config({"retrieval": {"channels": ["bm25"]}}, tmp_path).retrieval.channels == ("bm25",)
    # A list the file does not name is the default (every channel), not an empty one.
    assert build_config({"retrieval": {}}, tmp_path).retrieval.channels == CHANNELS


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
        run = aokun_in_process(*args)
        assert run.returncode == 0, run.stderr
        assert str(tmp_path / "elsewhere") in run.stdout
    env_run = aokun_in_process("stats", env={"AOKUN_CONFIG": str(path), "PATH": "/usr/bin:/bin"}, cwd=Path("/"))
    assert env_run.returncode == 0, env_run.stderr
    assert '"total": 0' in env_run.stdout
    assert (tmp_path / "elsewhere" / "aokun.db").exists()


# -- every number finite and in range, strings of sane length, no system data folder -----------

def _keys(*types):
    import dataclasses
    import typing

    for section in dataclasses.fields(AppConfig):
        if section.name == "source":
            continue
        cls = section.default_factory
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if hints[f.name] in types:
                yield section.name, f


NUMBER_KEYS = [(s, f.name) for s, f in _keys(int, float)]
FLOAT_KEYS = [(s, f.name) for s, f in _keys(float)]


def test_every_number_has_a_range_holding_its_default():
    for section, f in _keys(int, float):
        low, high = f.metadata["min"], f.metadata["max"]
        assert low is not None and high is not None, f"{section}.{f.name} has no range"
        assert low <= f.default <= high, f"{section}.{f.name}: default outside its range"


@pytest.mark.parametrize("section, key", FLOAT_KEYS)
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_nan_and_infinities_are_refused_for_every_float_key(section, key, value, tmp_path):
    with pytest.raises(ConfigError) as err:
        build_config({section: {key: value}}, tmp_path)
    assert str(err.value) == f"{section}.{key} must be a finite number, got {value}"


@pytest.mark.parametrize("section, key", NUMBER_KEYS)
def test_absurd_numbers_are_refused_naming_the_key(section, key, tmp_path):
    with pytest.raises(ConfigError, match=rf"^{section}\.{key} must be <= "):
        build_config({section: {key: 10 ** 12}}, tmp_path)


def test_yaml_nan_and_inf_in_the_file_are_refused(tmp_path):
    path = tmp_path / "config.yaml"
    for text, message in (("retrieval:\n  bm25_weight: .nan\n", "retrieval.bm25_weight must be a finite number"),
                          ("forgetting:\n  decay_rate: .inf\n", "forgetting.decay_rate must be a finite number"),
                          ("queue:\n  lease_s: -.inf\n", "queue.lease_s must be a finite number")):
        path.write_text(text)
        with pytest.raises(ConfigError, match=message):
            load_config(path, env={})


def test_a_huge_string_is_refused_in_one_short_line(tmp_path):
    huge = "x" * 1_000_000
    for raw, key in (({"server": {"host": huge}}, "server.host"),
                     ({"summarizer": {"model": huge}}, "summarizer.model"),
                     ({"text": {"user_words": ["ok", huge]}}, "text.user_words entry 2"),
                     ({"storage": {"data_dir": huge}}, "storage.data_dir")):
        with pytest.raises(ConfigError) as err:
            build_config(raw, tmp_path)
        message = str(err.value)
        assert message.startswith(f"{key} is 1000000 characters long; at most ")
        assert "\n" not in message and len(message) < 300
    many = [f"word{n}" for n in range(30_000)]
    with pytest.raises(ConfigError, match=r"^text.stop_words holds .* characters in 30000 entries"):
        build_config({"text": {"stop_words": many}}, tmp_path)


@pytest.mark.parametrize("folder", ["/", "/etc", "/usr", "/usr/bin", "/var", "/proc", "/sys",
                                    "/dev", "/boot", "/lib", "/bin/aokun", "/etc/aokun"])
def test_a_system_folder_is_refused_as_data_dir(folder, tmp_path):
    with pytest.raises(ConfigError) as err:
        build_config({"storage": {"data_dir": folder}}, tmp_path)
    # (resolved first: /lib may be a link to /usr/lib)
    assert str(err.value).startswith("storage.data_dir /")
    assert " is a system folder; choose a folder of its own" in str(err.value)


def test_the_home_folder_itself_and_an_unwritable_folder_are_refused(tmp_path, monkeypatch):
    import os

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    with pytest.raises(ConfigError, match=r"^storage.data_dir .* is your home folder itself"):
        build_config({"storage": {"data_dir": "~"}}, tmp_path)
    assert build_config({"storage": {"data_dir": "~/aokun-data"}}, tmp_path).storage.data_dir == home / "aokun-data"
    if os.geteuid() != 0:  # root writes anywhere: permissions do not hold for it
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        with pytest.raises(ConfigError, match=r"^storage.data_dir .* is not writable by this user"):
            build_config({"storage": {"data_dir": "locked"}}, tmp_path)


def test_live_reload_keeps_the_running_config_when_the_file_turns_invalid(tmp_path):
    from shared.live_config import LiveConfig

    path = tmp_path / "config.yaml"
    path.write_text("retrieval:\n  bm25_weight: 0.7\n")
    live = LiveConfig(load_config(path, env={}))
    for text in ("retrieval:\n  bm25_weight: .nan\n", "forgetting:\n  decay_rate: .inf\n",
                 f"server:\n  host: {'h' * 100_000}\n", "storage:\n  data_dir: /etc\n"):
        path.write_text(text)
        assert live.reload() is None
        assert live.now.retrieval.bm25_weight == 0.7
        assert live.now.storage.data_dir == tmp_path / "data"
    path.write_text("retrieval:\n  bm25_weight: 0.9\n")
    assert live.reload() is not None and live.now.retrieval.bm25_weight == 0.9


def test_the_panels_save_refuses_what_the_loader_refuses(tmp_path):
    from aokun_panel.config_file import save_settings

    path = tmp_path / "config.yaml"
    path.write_text("retrieval:\n  bm25_weight: 0.7\n")
    before = path.read_text()
    for changes, message in (({"retrieval.bm25_weight": float("nan")}, "^retrieval.bm25_weight must be a finite"),
                             ({"forgetting.decay_rate": float("inf")}, "^forgetting.decay_rate must be a finite"),
                             ({"retrieval.bm25_weight": 1e9}, r"^retrieval.bm25_weight must be <= 100.0"),
                             ({"server.host": "x" * 20_000}, "^server.host is 20000 characters long"),
                             ({"storage.data_dir": "/etc"}, "^storage.data_dir /etc is a system folder")):
        with pytest.raises(ConfigError, match=message):
            save_settings(path, changes)
        assert path.read_text() == before


def test_a_secret_is_its_key_else_the_variable_its_env_key_names():
    env = {"AOKUN_TEST_KEY": "from-env"}
    assert secret("in-file", "AOKUN_TEST_KEY", env) == "in-file"
    assert secret("", "AOKUN_TEST_KEY", env) == "from-env"
    assert secret("", "AOKUN_TEST_UNSET", env) == ""
    assert secret("", "", {"": "never"}) == ""  # no variable named: none is read
