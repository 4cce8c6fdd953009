"""What the store's face says about a configured store without opening it."""

from __future__ import annotations

from shared.config import StorageConfig
from shared.store import open_store
from shared.store.face import address, may_exist, secret_env_names


def test_a_sqlite_store_may_exist_once_its_file_is_there(tmp_path):
    storage = StorageConfig(data_dir=tmp_path)
    assert not may_exist(storage)
    open_store(storage).close()
    assert may_exist(storage)
    assert address(storage) == str(tmp_path / "aokun.db")
    assert secret_env_names(storage) == []


def test_a_postgresql_store_is_always_probed_and_names_its_password_variable(tmp_path):
    storage = StorageConfig(data_dir=tmp_path, backend="postgresql", url="postgresql://db.example/aokun",
                            password_env="AOKUN_TEST_PG_PASSWORD")
    assert may_exist(storage)
    assert address(storage) == "postgresql://db.example:5432/aokun"
    assert secret_env_names(storage) == ["AOKUN_TEST_PG_PASSWORD"]
    with_password = StorageConfig(backend="postgresql", url="postgresql://u:pw@db.example:6543/aokun")
    assert secret_env_names(with_password) == []
    assert address(with_password) == "postgresql://db.example:6543/aokun"
