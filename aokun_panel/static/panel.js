// Small helpers shared by the pages: writes carry the CSRF token; answers are JSON.
"use strict";
const aokun = {
  csrf: document.querySelector('meta[name="csrf-token"]').content,

  async send(method, url, body) {
    const response = await fetch(url, {
      method,
      headers: {"Content-Type": "application/json", "X-CSRF-Token": aokun.csrf},
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
    });
    const data = await response.json().catch(() => ({error: response.statusText}));
    if (!response.ok) throw new Error(data.error || response.statusText);
    return data;
  },

  async get(url) {
    const response = await fetch(url, {credentials: "same-origin"});
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
    if (seconds === null || seconds === undefined) return "never";
    if (seconds < 90) return `${Math.round(seconds)} s`;
    if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
    if (seconds < 172800) return `${(seconds / 3600).toFixed(1)} h`;
    return `${(seconds / 86400).toFixed(1)} d`;
  },
};
