// Small helpers shared by the pages: writes carry the CSRF token; answers are JSON; texts come
// from the page's language catalogue (the server hands the `js.` keys in #i18n).
"use strict";
const aokun = {
  csrf: document.querySelector('meta[name="csrf-token"]').content,
  strings: JSON.parse(document.getElementById("i18n").textContent),

  // aokun.t("queue.retried", {n: 3}): the text in the page's language, {placeholders} filled.
  t(key, values = {}) {
    const text = aokun.strings[key] ?? key;
    return text.replace(/\{(\w+)\}/g, (whole, name) => (name in values ? String(values[name]) : whole));
  },

  async send(method, url, body) {
    const response = await fetch(url, {
      method,
      headers: {"Content-Type": "application/json", "Accept": "application/json", "X-CSRF-Token": aokun.csrf},
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
    });
    const data = await response.json().catch(() => ({error: response.statusText}));
    if (!response.ok) throw new Error(data.error || response.statusText);
    return data;
  },

  async get(url) {
    const response = await fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"}});
    const data = await response.json();
    if (!response.ok) throw new Error(data.error || response.statusText);
    return data;
  },

  // Re-run `refresh` every `seconds` while the page is visible.
  every(seconds, refresh) {
    setInterval(() => { if (!document.hidden) refresh().catch(console.error); }, seconds * 1000);
  },

  text(element, value) { element.textContent = value; },

  age(seconds) {
    if (seconds === null || seconds === undefined) return aokun.t("never");
    if (seconds < 90) return aokun.t("age.s", {n: Math.round(seconds)});
    if (seconds < 5400) return aokun.t("age.min", {n: Math.round(seconds / 60)});
    if (seconds < 172800) return aokun.t("age.h", {n: (seconds / 3600).toFixed(1)});
    return aokun.t("age.d", {n: (seconds / 86400).toFixed(1)});
  },

  // A year-long, script-readable preference cookie (language, time zone).
  remember(name, value) {
    document.cookie = `${name}=${encodeURIComponent(value)}; Path=/; Max-Age=31536000; SameSite=Strict`;
  },
};

// The header's switches: the choice is kept in a cookie and the page shown again in it.
(() => {
  const browserZone = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  // The server cannot know the browser's zone: it is told on every page, for the next one.
  if (!document.cookie.split("; ").includes(`aokun_browser_tz=${encodeURIComponent(browserZone)}`)) {
    aokun.remember("aokun_browser_tz", browserZone);
  }
  const zones = document.getElementById("zone-switch");
  if (![...zones.options].some(o => o.value === browserZone)) {
    zones.append(new Option(`${browserZone} (${aokun.t("browser_zone")})`, browserZone));
  }
  zones.addEventListener("change", () => { aokun.remember("aokun_tz", zones.value); location.reload(); });
  const lang = document.getElementById("lang-switch");
  lang.addEventListener("change", () => { aokun.remember("aokun_lang", lang.value); location.reload(); });
})();
