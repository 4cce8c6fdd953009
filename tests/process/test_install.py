"""A non-editable install works: the wheel holds every file the packages read, and a memory
goes through a front, a worker and the CLI that all run from a fresh venv, not the source tree."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import httpx
import pytest
from mcp.client.stdio import StdioServerParameters

from helpers import all_processed, db_rows, free_port, mcp_session, stop, wait_for, write_config

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("aokun_server", "aokun_admin", "aokun_worker", "aokun_panel", "shared")
SCRIPTS = "Scripts" if os.name == "nt" else "bin"


def test_the_packaged_config_example_is_the_top_level_one():
    """The panel and shared/config_file.py read the packaged copy (an installed package has no
    repository root); people copy the top-level file. They must be one text."""
    top = (ROOT / "config.example.yaml").read_bytes()
    packaged = (ROOT / "shared" / "resources" / "config.example.yaml").read_bytes()
    assert packaged == top, ("shared/resources/config.example.yaml differs from config.example.yaml: "
                             "copy config.example.yaml over it")


def source_files() -> set[str]:
    """Every file of the packages as pip would see them (not caches)."""
    found = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                found.add(path.relative_to(ROOT).as_posix())
    return found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel `pip wheel .` builds, from a copy of the sources (the build leaves build/ and
    *.egg-info beside them), offline: setuptools from the test extra, no build isolation."""
    import setuptools

    assert int(setuptools.__version__.split(".")[0]) >= 77, \
        "building needs setuptools>=77 in this venv: scripts/setup test installs it"
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = work / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                    "--quiet", "-w", str(out), str(source)], check=True, cwd=work)
    (built,) = out.glob("aokun_memory-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh venv with the wheel installed into it. Its dependencies come, offline, from this
    venv's site-packages, added after its own by a .pth line (which does not run the editable
    install's hook there, so the source tree stays out of reach)."""
    target = tmp_path_factory.mktemp("venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(target)], check=True)
    python = target / SCRIPTS / ("python.exe" if os.name == "nt" else "python")
    own = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, capture_output=True, text=True).stdout.strip())
    (own / "project-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed",
                    "--quiet", str(wheel)], check=True, cwd=target.parent, env=clean_env())
    return target


def clean_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "AOKUN_CONFIG")}
    return env


def run_in(venv: Path, *args: str, cwd: Path) -> str:
    found = subprocess.run([str(venv / SCRIPTS / args[0]), *args[1:]], cwd=cwd, env=clean_env(),
                           capture_output=True, text=True, timeout=120)
    assert found.returncode == 0, f"{args} failed ({found.returncode}):\n{found.stdout}\n{found.stderr}"
    return found.stdout


@pytest.mark.slow
def test_the_wheel_holds_every_file_of_the_packages(wheel):
    with zipfile.ZipFile(wheel) as archive:
        shipped = {name for name in archive.namelist() if not name.startswith("aokun_memory-")}
        assert archive.read("shared/resources/config.example.yaml") == (ROOT / "config.example.yaml").read_bytes()
    missing = source_files() - shipped
    assert not missing, f"not in the wheel (add them to [tool.setuptools.package-data]): {sorted(missing)}"
    for needed in ("shared/resources/atom_rules.yaml", "aokun_panel/templates/base.html",
                   "aokun_panel/static/vendor/cytoscape/cytoscape.min.js"):
        assert needed in shipped


IMPORTS = """
import json, aokun_server, aokun_admin, aokun_worker, aokun_panel, shared
from aokun_panel.config_file import EXAMPLE_PATH, example_settings
from shared.extract.atomize import AtomRules
import aokun_panel.app as panel
print(json.dumps({"files": [m.__file__ for m in (aokun_server, aokun_admin, aokun_worker, aokun_panel, shared)],
                  "example": str(EXAMPLE_PATH), "settings": sum(map(len, example_settings().values())),
                  "rules": sum(map(len, AtomRules.load(None).types.values())), "panel": str(panel.HERE)}))
"""


@pytest.mark.slow
def test_the_installed_package_runs_from_its_venv(venv, tmp_path):
    found = json.loads(run_in(venv, "python", "-c", IMPORTS, cwd=tmp_path))
    inside = str(venv.resolve())
    for path in [*found["files"], found["example"], found["panel"]]:
        assert path.startswith(inside) and str(ROOT) not in path, path
    assert found["settings"] > 50 and found["rules"] > 0


@pytest.mark.slow
def test_a_memory_goes_through_the_installed_front_worker_and_cli(venv, tmp_path):
    config = write_config(tmp_path)
    bin_dir = venv / SCRIPTS
    log = open(tmp_path / "installed-worker.log", "wb")
    worker = subprocess.Popen([str(bin_dir / "aokun-worker"), "--config", str(config)], cwd=tmp_path,
                              env=clean_env(), stdout=log, stderr=log)
    log.close()
    try:
        front = StdioServerParameters(command=str(bin_dir / "aokun-server"), args=["--config", str(config)],
                                      cwd=str(tmp_path))
        with mcp_session(front) as s:
            memory = s.ok("memorize", {"content": "Installed from a wheel, I remember that Mia bakes sourdough"})["id"]
            wait_for(lambda: all_processed(config, 1), what="the installed worker to run every stage")
            results = s.ok("recall", {"query": "who bakes sourdough", "explain": True})["results"]
            assert results[0]["id"] == memory and "vector" in results[0]["explain"]["channels"]
        assert db_rows(config, "SELECT model FROM vectors WHERE kind = 'document'") \
            == [("local:multilingual-e5-small-q4",)]
        assert db_rows(config, "SELECT COUNT(*) FROM memory_atoms")[0][0] >= 1  # atom_rules.yaml was there
        assert "consistent" in run_in(venv, "aokun", "doctor", "--config", str(config), cwd=tmp_path)
    finally:
        stop(worker)
    worker_log = (tmp_path / "installed-worker.log").read_text(encoding="utf-8")
    assert re.search(r"embedding\.local_model auto: e5 ", worker_log), worker_log


@pytest.mark.slow
def test_the_installed_panel_serves_its_pages_and_files(venv, tmp_path):
    config = write_config(tmp_path)
    port = free_port()
    panel = subprocess.Popen([str(venv / SCRIPTS / "aokun-panel"), "--config", str(config), "--port", str(port),
                              "--no-browser"], cwd=tmp_path, env=clean_env(), stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = re.search(r"http://127\.0\.0\.1:\d+/\?token=[\w-]+", panel.stderr.readline()).group(0)
        with httpx.Client(timeout=30) as client:
            deadline = time.monotonic() + 30
            while True:  # the socket listens before the app has started
                try:
                    assert client.get(url).status_code == 200
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline
                    time.sleep(0.1)
            settings = client.get(f"http://127.0.0.1:{port}/settings")
            assert settings.status_code == 200 and "recall_top_k" in settings.text
            assert client.get(f"http://127.0.0.1:{port}/static/vendor/uplot/uPlot.min.css").status_code == 200
    finally:
        stop(panel)
