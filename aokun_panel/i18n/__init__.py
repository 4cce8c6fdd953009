"""The panel's two languages: English and 简体中文.

The words live as data, one catalogue a language (en.yaml, zh.yaml beside this module), nested
by page and flattened to dotted keys ("memories.search"). One lookup, `translate`, serves the
templates (as `t`, bound to the request's language by render.py), the handlers' messages, the
gate's page for a missing token, and the pages' small scripts (the `js.` keys, handed to the
page as JSON; panel.js's aokun.t reads them).

Which language: the `aokun_lang` cookie (the switch in every page's header sets it), else the
browser's Accept-Language (zh* first means Chinese; anything else, English).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import yaml

LANGS = ("en", "zh")
DEFAULT = "en"
COOKIE = "aokun_lang"
HERE = Path(__file__).resolve().parent
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


@cache
def catalogue(lang: str) -> dict[str, str]:
    """{dotted key: text} of one language."""
    with open(HERE / f"{lang}.yaml", encoding="utf-8") as handle:
        return dict(_flatten(yaml.safe_load(handle) or {}))


def _flatten(tree: dict, prefix: str = ""):
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _flatten(value, f"{name}.")
        else:
            yield name, str(value)


def translate(lang: str, key: str, **values) -> str:
    """The text of `key` in `lang` with its {placeholders} filled. Only {word} placeholders are
    replaced (never str.format): texts may hold JSON braces. A key missing in one language
    falls back to English, then to the key itself, so a slip shows rather than breaks a page
    (tests/test_panel_i18n.py keeps both catalogues complete)."""
    text = catalogue(lang).get(key) or catalogue(DEFAULT).get(key) or key
    if not values:
        return text
    return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), text)


def choose_language(cookie: str | None, accept_language: str | None) -> str:
    """The cookie's choice when it names a language we have, else the browser's first
    preference (by q-value): Chinese for any zh*, English for the rest."""
    if cookie in LANGS:
        return cookie
    best, best_q = None, -1.0
    for part in (accept_language or "").split(","):
        tag, _, params = part.strip().partition(";")
        q = 1.0
        if params.strip().startswith("q="):
            try:
                q = float(params.strip()[2:])
            except ValueError:
                q = 0.0
        if tag and q > best_q:
            best, best_q = tag.lower(), q
    return "zh" if best and best.startswith("zh") else DEFAULT


def language_of(request) -> str:
    """The language of a Starlette request."""
    return choose_language(request.cookies.get(COOKIE), request.headers.get("accept-language"))


SHARED_WITH_JS = ("node.", "edge.", "type.", "stage.", "status.")  # names both sides show


def js_strings(lang: str) -> dict[str, str]:
    """The texts the pages' scripts use: keys under `js.` (without the prefix), and the names
    of node, edge and atom types, stages and statuses (keys as they are)."""
    found = {}
    for key, value in catalogue(lang).items():
        if key.startswith("js."):
            found[key[3:]] = value
        elif key.startswith(SHARED_WITH_JS):
            found[key] = value
    return found
