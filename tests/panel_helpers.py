"""The panel under test: its app built in the test process (for what a page or an API answer
says), a real `aokun panel` process and a real headless Chromium.

Chromium is Debian's (`apt-get install chromium`; .ci/run installs it), driven by the
playwright package; playwright's own browser download is not used. Without a Chromium the
browser tests skip and say so (scripts/test prints it too).

The browser tests take a screenshot of each page they check, into build/screenshots/ (ignored
by git), so running the tests leaves `git status` clean. The README shows some of them from
docs/screenshots/; to refresh those on purpose, point the tests there and commit the result:

    AOKUN_SCREENSHOTS_DIR=docs/screenshots scripts/test tests/process/test_panel_*.py

(a relative AOKUN_SCREENSHOTS_DIR is taken from the repository's root).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from helpers import BIN, free_port

ROOT = Path(__file__).resolve().parent.parent
SCREENSHOTS_ENV = "AOKUN_SCREENSHOTS_DIR"
DEFAULT_SCREENSHOTS = Path("build") / "screenshots"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def find_chromium() -> str | None:
    explicit = os.environ.get("AOKUN_CHROMIUM")
    if explicit:
        return explicit
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


PANEL_PORT = 8799  # the port the in-process app believes it serves (its gate checks Origin and Host)


@contextmanager
def panel_in_process(config: Path):
    """The panel's app built in this process as `aokun panel` builds it (its services, its gate
    and a fresh token) and served to a Starlette TestClient, which runs the app's lifespan;
    yield (client, base_url, token), the client already holding the panel's session cookie."""
    from starlette.testclient import TestClient

    from aokun_panel.app import build_app, build_context
    from shared.config import load_config
    from shared.live_config import LiveConfig

    token = secrets.token_urlsafe(24)
    app = build_app(build_context(LiveConfig(load_config(config)), token), token, PANEL_PORT)
    url = f"http://127.0.0.1:{PANEL_PORT}"
    with TestClient(app, base_url=url) as client:
        client.cookies.set("aokun_panel", token)
        yield client, url, token


@contextmanager
def panel_process(config: Path, env: dict | None = None):
    """Run `aokun panel --no-browser` on a free port; yield (base_url, token)."""
    port = free_port()
    log = config.parent / "panel-test.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(BIN / "aokun"), "panel", "--config", str(config), "--port", str(port),
                                 "--no-browser"], stdout=out, stderr=out, env={**os.environ, **(env or {})})
    try:
        deadline = time.monotonic() + 60
        token = None
        while token is None:
            text = log.read_text(errors="replace")
            found = re.search(r"http://127\.0\.0\.1:\d+/\?token=(\S+)", text)
            if found:
                token = found.group(1)
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"panel did not start: {text}")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}", token
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextmanager
def chromium_page(locale: str | None = None, timezone_id: str | None = None):
    """A fresh headless Chromium page (skips the test when no Chromium is installed). `locale`
    sets the browser's language (its Accept-Language and navigator.language), `timezone_id`
    its time zone."""
    executable = find_chromium()
    if executable is None:
        pytest.skip("no Chromium found (apt-get install chromium, or set AOKUN_CHROMIUM): "
                    "browser tests skipped")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        try:
            options = {"locale": locale, "timezone_id": timezone_id}
            page = browser.new_page(viewport={"width": 1280, "height": 900},
                                    **{k: v for k, v in options.items() if v})
            yield page
        finally:
            browser.close()


def screenshots_dir() -> Path:
    """Where screenshot() writes: $AOKUN_SCREENSHOTS_DIR, else build/screenshots/ (relative
    paths from the repository's root, wherever pytest runs from)."""
    return ROOT / (os.environ.get(SCREENSHOTS_ENV) or DEFAULT_SCREENSHOTS)


def screenshot(page, name: str) -> Path:
    """Write the page as <name>.png in screenshots_dir(): build/screenshots/ unless
    AOKUN_SCREENSHOTS_DIR says otherwise (docs/screenshots to refresh the README's images)."""
    folder = screenshots_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def collect_problems(page) -> list[str]:
    """A list that fills with what the page reports as wrong: console errors, uncaught
    exceptions, and responses of 400 or more (a missing favicon, a failed fetch)."""
    found: list[str] = []
    page.on("console", lambda m: found.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: found.append(f"pageerror: {e}"))
    page.on("response", lambda r: found.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    return found
