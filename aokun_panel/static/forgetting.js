// The forgetting page: asks the server for the curves (computed by the worker's decay code)
// with the values in the forms, and draws them with uPlot. Nothing is computed here.
"use strict";
(() => {
  const TYPE_COLOURS = {episodic: "#e8590c", planned: "#ae3ec9", factual: "#3559e0",
                        relational: "#0ca678", preference: "#f08c00", unknown: "#868e96"};
  const problem = document.getElementById("problem");
  const charts = {};
  window.aokunForgetting = charts;

  const query = form => {
    const params = new URLSearchParams();
    for (const input of form.querySelectorAll("input")) {
      params.set(input.name, input.value.trim());
      if (input.dataset.current !== undefined) {
        input.classList.toggle("changed", Number(input.value) !== Number(input.dataset.current));
      }
    }
    return params;
  };

  const width = el => Math.max(320, el.clientWidth - 12);
  const fixed = (v, digits = 3) => (v === null || v === undefined ? "–" : Number(v).toFixed(digits));

  function plot(name, element, options, data) {
    if (charts[name]) {
      charts[name].setData(data);
    } else {
      charts[name] = new uPlot({width: width(element), height: 320, ...options}, data, element);
    }
  }

  function drawDecay(d) {
    plot("importance", document.getElementById("decay-chart"), {
      scales: {x: {time: false}, y: {range: [0, 1]}},
      axes: [{label: aokun.t("forgetting.days_from_now")}, {label: aokun.t("forgetting.importance")}],
      series: [
        {label: aokun.t("forgetting.day")},
        {label: aokun.t("forgetting.tried"), stroke: "#3559e0", width: 2.5, value: (u, v) => fixed(v)},
        {label: aokun.t("forgetting.current"), stroke: "#98a2b3", width: 2, dash: [6, 4], value: (u, v) => fixed(v)},
        {label: aokun.t("forgetting.threshold"), stroke: "#b42318", width: 1, dash: [2, 4], points: {show: false}},
      ],
    }, [d.days, d.tried, d.current, d.days.map(() => d.threshold)]);
    const last = d.tried.length - 1;
    let text = aokun.t("forgetting.after", {days: last, value: fixed(d.tried[last]), current: fixed(d.current[last])});
    text += " " + (d.below_threshold_day === null
      ? aokun.t("forgetting.stays_above", {threshold: d.threshold})
      : aokun.t("forgetting.falls_below", {threshold: d.threshold, day: d.below_threshold_day}));
    document.getElementById("decay-summary").textContent = text;
  }

  function drawAtoms(d) {
    // A step curve (a plan's) is drawn wider: it shares the top edge with every curve until it drops.
    const types = Object.keys(d.types);
    plot("atoms", document.getElementById("atom-chart"), {
      scales: {x: {time: false}, y: {range: [0, 1.05]}},
      axes: [{label: aokun.t("forgetting.atom_days")}, {label: aokun.t("forgetting.time_factor")}],
      series: [{label: aokun.t("forgetting.day")}, ...types.map(t => ({label: aokun.t(`type.${t}`), stroke: TYPE_COLOURS[t] || "#444",
                                                   width: d.types[t].curve === "step" ? 3 : 2, value: (u, v) => fixed(v)}))],
    }, [d.days, ...types.map(t => d.types[t].factors)]);
    const rows = types.map(t => {
      const a = d.types[t];
      const days = v => aokun.t("forgetting.n_days", {n: fixed(v, 1)}), on = v => aokun.t("forgetting.on_day", {n: fixed(v, 1)});
      const cells = [aokun.t(`type.${t}`), aokun.t(`forgetting.curve_${a.curve}`), days(a.base_days), days(a.ttl_days),
                     on(a.ttl_days), on(a.forgotten_day), on(a.purged_day)];
      const tr = document.createElement("tr");
      cells.forEach((c, i) => {
        const td = document.createElement("td");
        if (i === 0) td.append(Object.assign(document.createElement("span"), {className: "swatch", style: `background:${TYPE_COLOURS[t]}`}));
        td.append(c);
        tr.append(td);
      });
      return tr;
    });
    document.querySelector("#atom-table tbody").replaceChildren(...rows);
  }

  function wire(formId, url, draw, name) {
    const form = document.getElementById(formId);
    let timer = null;
    let asked = 0;
    const refresh = async () => {
      const ticket = ++asked;
      try {
        const data = await aokun.get(`${url}?${query(form)}`);
        if (ticket !== asked) return;  // a newer answer is on its way
        draw(data);
        problem.hidden = true;
        charts[`${name}Data`] = data;
        form.dataset.version = String(Number(form.dataset.version || 0) + 1);
      } catch (error) {
        problem.textContent = error.message;
        problem.hidden = false;
      }
    };
    form.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(refresh, 200); });
    form.addEventListener("submit", evt => { evt.preventDefault(); refresh(); });
    return refresh();
  }

  wire("decay-form", "/api/forgetting/curve", drawDecay, "importance");
  wire("atom-form", "/api/forgetting/atoms", drawAtoms, "atoms");
  window.addEventListener("resize", () => {
    charts.importance?.setSize({width: width(document.getElementById("decay-chart")), height: 320});
    charts.atoms?.setSize({width: width(document.getElementById("atom-chart")), height: 320});
  });
})();
