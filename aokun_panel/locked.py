"""The page a browser gets when it opens the panel without its token: what happened and how to
get the URL, in the browser's language (or the one chosen earlier), instead of raw JSON.
Scripts and XHR (which ask for JSON, or do not ask for HTML) keep the JSON answer."""

from __future__ import annotations

from html import escape
from http.cookies import SimpleCookie

from aokun_panel.i18n import COOKIE, choose_language, translate


def wants_html(path: str, headers: dict) -> bool:
    """A browser opening a page: it asks for text/html, and this is no API call."""
    return ("text/html" in headers.get("accept", "") and not path.startswith("/api/")
            and headers.get("x-requested-with", "").lower() != "xmlhttprequest")


def page(headers: dict) -> bytes:
    cookie = SimpleCookie()
    try:
        cookie.load(headers.get("cookie", ""))
    except Exception:  # a malformed Cookie header chooses nothing
        pass
    lang = choose_language(cookie[COOKIE].value if COOKIE in cookie else None, headers.get("accept-language"))
    t = lambda key: escape(translate(lang, key))  # noqa: E731
    html_lang = "zh-CN" if lang == "zh" else "en"
    return f"""<!doctype html>
<html lang="{html_lang}"><head><meta charset="utf-8">\
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{t("locked.title")} · Aokun Memory</title><link rel="icon" href="data:,">
<style>body{{font-family:system-ui,sans-serif;color:#1d2430;background:#f7f8fa;margin:0}}
main{{max-width:40rem;margin:4rem auto;background:#fff;border:1px solid #e4e7ec;border-radius:10px;padding:1.5rem 2rem}}
code{{background:#f2f4f7;padding:.1rem .35rem;border-radius:4px}} li{{margin:.4rem 0}}</style></head>
<body><main id="locked"><h1>{t("locked.title")}</h1>
<p>{t("locked.why")}</p>
<ul><li>{t("locked.panel")} <code>aokun panel</code></li>
<li>{t("locked.run")} <code>aokun run</code> / <code>scripts/run</code></li>
<li>{t("locked.user")} <code>/?token=…</code></li></ul>
<p>{t("locked.then")}</p></main></body></html>""".encode()
