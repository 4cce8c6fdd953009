// The graph page: draws /api/graph with cytoscape.js; d3-force lays it out; a click on a node
// opens its side panel.
"use strict";
(() => {
  // Keyed by the node types of shared/store/graph.py; the colours are panel.css's, so the
  // legend and the drawing cannot drift apart.
  const SHAPES = {person: "ellipse", place: "triangle", organisation: "hexagon", other: "pentagon",
                  topic: "diamond", fact: "round-rectangle"};
  const css = name => getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  const COLOURS = Object.fromEntries(Object.keys(SHAPES).map(t => [t, css(`--node-${t}`)]));
  const EDGE_COLOURS = {describes: "#c3c9d3", co_occurs_with: "#9db1f5", mentioned_in: "#96dcc4",
                        relation: css("--edge-relation")};
  const LINK_LENGTHS = {describes: 60, mentioned_in: 25, co_occurs_with: 120, relation: 90};
  const TICKS = 200;        // cooling from alpha 1 to d3's alphaMin in this many ticks
  const SLICE_MS = 60;      // ticks run in slices so the page stays responsive meanwhile

  const box = document.getElementById("graph");
  const panel = document.getElementById("node-panel");
  const status = document.getElementById("graph-status");
  const el = (tag, props = {}, ...children) => {
    const node = Object.assign(document.createElement(tag), props);
    node.append(...children);
    return node;
  };

  function elements(data) {
    const nodes = data.nodes.map(n => {
      const fact = n.type === "fact";
      return {data: {
        id: `n${n.id}`, key: n.id, type: n.type, label: n.label, degree: n.degree, self: Boolean(n.self),
        size: fact ? 10 + 2 * Math.sqrt(Math.min(n.degree, 25)) : 18 + 4 * Math.sqrt(Math.min(n.degree, 400)),
        font: fact ? 6 : 11 + Math.min(Math.sqrt(n.degree), 7),
      }};
    });
    const edges = data.edges.map(([source, target, type, memories, relation], i) => ({data: {
      id: `e${i}`, source: `n${source}`, target: `n${target}`, type, relation: relation || "",
      width: Math.min(1 + Math.log2(memories), 5),
    }}));
    return {nodes, edges};
  }

  // Selectors and data fields only: function mappers would run per element on every redraw.
  function style(large) {
    const byType = Object.keys(COLOURS).map(t => ({selector: `node[type = "${t}"]`, style: {
      "shape": SHAPES[t], "background-color": COLOURS[t], "z-index": t === "fact" ? 1 : 10,
      // A label is drawn only once it would be this large on screen: facts' (long, many)
      // only well zoomed in; a selected or hovered node's always.
      "min-zoomed-font-size": t === "fact" ? 16 : (large ? 8 : 4),
    }}));
    const edgeTypes = Object.keys(EDGE_COLOURS).map(t => ({selector: `edge[type = "${t}"]`, style: {"line-color": EDGE_COLOURS[t]}}));
    return [
      {selector: "node", style: {
        "width": "data(size)", "height": "data(size)", "label": "data(label)", "font-size": "data(font)",
        "text-valign": "bottom", "text-margin-y": 3, "color": "#1d2430",
        "text-outline-color": "#fff", "text-outline-width": 2, "text-max-width": 160, "text-wrap": "ellipsis",
        "border-width": 0,
      }},
      ...byType,
      {selector: "edge", style: {"curve-style": "haystack", "line-color": "#ccc", "width": "data(width)", "opacity": 0.8}},
      ...edgeTypes,
      // A relation reads one way (B is A's wife): an arrow to B, named; haystack edges draw
      // no arrows, so these few are bezier curves.
      {selector: "edge[type = 'relation']", style: {
        "curve-style": "bezier", "target-arrow-shape": "triangle", "target-arrow-color": EDGE_COLOURS.relation,
        "arrow-scale": 0.8, "label": "data(relation)", "font-size": 9, "color": EDGE_COLOURS.relation,
        "text-rotation": "autorotate", "text-outline-color": "#fff", "text-outline-width": 2,
        "min-zoomed-font-size": large ? 8 : 4, "opacity": 1, "z-index": 5,
      }},
      // The user's node: one per persona, ringed.
      {selector: "node[?self]", style: {"border-width": 3, "border-color": css("--self-ring"), "border-style": "double",
                                        "font-weight": "bold", "z-index": 15}},
      {selector: "node:selected", style: {"border-width": 3, "border-color": "#1d2430"}},
      {selector: ".faded", style: {"opacity": 0.12, "text-opacity": 0}},
      {selector: "node.near[type != 'fact'], node:selected, node.hover", style: {"min-zoomed-font-size": 0}},
      {selector: "node.hover[type = 'fact'], node:selected[type = 'fact']", style: {"font-size": 9, "z-index": 20}},
    ];
  }

  // A force layout by d3-force (Barnes-Hut many-body, O(n log n) a tick), run before the
  // drawing: 3,000 nodes and 15,000 edges in 2-3 s in headless Chromium here, where
  // cytoscape's own cose took 120 s and fcose over 270 s (its spectral draft alone, 0.7 s,
  // piles hub-heavy graphs on top of each other).
  async function layout(elements, progress) {
    const nodes = elements.nodes.map(n => ({element: n, id: n.data.id, type: n.data.type, r: n.data.size / 2}));
    const links = elements.edges.map(e => ({source: e.data.source, target: e.data.target, type: e.data.type}));
    const sim = d3.forceSimulation(nodes)
      .force("link", d3.forceLink(links).id(n => n.id).distance(l => LINK_LENGTHS[l.type] || 50))
      .force("charge", d3.forceManyBody().strength(n => (n.type === "fact" ? -40 : -250)).theta(1.2))
      .force("collide", d3.forceCollide(n => n.r + (n.type === "fact" ? 3 : 14)))  // room for a label
      .force("x", d3.forceX().strength(0.05)).force("y", d3.forceY().strength(0.05))
      .alphaDecay(1 - Math.pow(0.001, 1 / TICKS))
      .stop();
    for (let done = 0; done < TICKS;) {
      const slice = performance.now();
      while (done < TICKS && performance.now() - slice < SLICE_MS) { sim.tick(); done += 1; }
      progress(done / TICKS);
      await new Promise(requestAnimationFrame);
    }
    nodes.forEach(n => { n.element.position = {x: n.x, y: n.y}; });
  }

  function noteText(d) {
    for (const [type, count] of Object.entries(d.counts)) {
      const cell = document.getElementById(`count-${type}`);
      if (cell) cell.textContent = `(${count})`;
    }
    if (!d.total) return aokun.t("graph.empty", {persona: d.persona || aokun.t("graph.no_persona")});
    if (d.capped) return aokun.t("graph.capped", {shown: d.shown.toLocaleString(), total: d.total.toLocaleString()});
    return aokun.t("graph.all", {total: d.total.toLocaleString()});
  }

  async function draw() {
    const params = new URLSearchParams({persona: box.dataset.persona, limit: box.dataset.limit});
    const data = await aokun.get(`/api/graph?${params}`);
    document.getElementById("graph-note").textContent = noteText(data);
    const large = data.nodes.length > 1000;
    const started = performance.now();
    const drawing = elements(data);
    await layout(drawing, part => { status.textContent = aokun.t("graph.laying_out", {n: data.nodes.length, pct: Math.round(part * 100)}); });
    const cy = cytoscape({
      container: document.getElementById("graph-canvas"), elements: drawing, style: style(large),
      layout: {name: "preset", fit: true, padding: 30}, minZoom: 0.05, maxZoom: 4,
      // Large graphs pan and zoom as a bitmap and without edges, redrawn when the view rests.
      textureOnViewport: large, hideEdgesOnViewport: large, pixelRatio: large ? 1 : "auto",
    });
    window.aokunGraph.cy = cy;
    await new Promise(requestAnimationFrame);  // the first frame drawn
    const ms = Math.round(performance.now() - started);
    status.textContent = aokun.t("graph.drawn", {nodes: data.nodes.length, edges: data.edges.length, ms});
    cy.on("tap", "node", evt => select(evt.target));
    cy.on("tap", evt => { if (evt.target === cy) clear(); });
    cy.on("mouseover", "node", evt => evt.target.addClass("hover"));
    cy.on("mouseout", "node", evt => evt.target.removeClass("hover"));
    box.dataset.state = "ready";
  }

  function clear() {
    const cy = window.aokunGraph.cy;
    cy.elements().removeClass("faded near");
  }

  function highlight(node) {
    const cy = window.aokunGraph.cy;
    const near = node.closedNeighborhood();
    cy.batch(() => {
      cy.elements().addClass("faded").removeClass("near");
      near.removeClass("faded");
      near.nodes().addClass("near");
    });
  }

  async function select(node) {
    const cy = window.aokunGraph.cy;
    cy.nodes(":selected").unselect();
    node.select();
    highlight(node);
    await openNode(node.data("key"));
  }

  function selectById(id) {
    const node = window.aokunGraph.cy.getElementById(`n${id}`);
    if (node.nonempty()) {
      window.aokunGraph.cy.animate({center: {eles: node}, duration: 250});
      return select(node);
    }
    return openNode(id);  // outside the drawn part: the panel still shows it
  }

  const memoryLink = id => el("a", {href: `/memories/${id}`}, `#${id}`);

  function refs(ids) {
    const span = el("span", {className: "refs"}, aokun.t("graph.from"));
    ids.slice(0, 6).forEach((id, i) => { if (i) span.append(", "); span.append(memoryLink(id)); });
    if (ids.length > 6) span.append(aokun.t("graph.and_more", {n: ids.length - 6}));
    return span;
  }

  async function openNode(id) {
    panel.replaceChildren(el("p", {className: "muted"}, aokun.t("loading")));
    let d;
    try {
      d = await aokun.get(`/api/graph/node/${id}`);
    } catch (error) {
      panel.replaceChildren(el("p", {className: "error"}, error.message));
      return;
    }
    const n = d.node;
    const kind = type => aokun.t(`node.${type}`);
    const memories = count => aokun.t(count === 1 ? "graph.memory" : "graph.memories", {n: count});
    const parts = [el("h2", {}, el("span", {className: `kind ${n.type}`}, kind(n.type)), " ", n.value)];
    if (n.self) parts.push(el("p", {className: "muted self-note"}, aokun.t("graph.self_note")));
    if (n.forms.length > 1) parts.push(el("p", {className: "muted"}, aokun.t("graph.written_as", {forms: n.forms.join(", ")})));
    if (d.relations.length) {
      // "wife: 王芳" reads "王芳 is this node's wife", whichever way the edge was stored.
      parts.push(el("h3", {}, aokun.t("graph.relations", {n: d.relations.length})));
      parts.push(el("ul", {id: "node-relations"}, ...d.relations.map(r => el("li", {},
        el("span", {className: "relation"}, `${r.relation}: `),
        el("span", {className: "related-node", onclick: () => selectById(r.id)}, r.label), " ",
        el("span", {className: `kind ${r.type}`}, kind(r.type)),
        el("span", {className: "refs"}, ` · ${memories(r.memories)}`)))));
    }
    parts.push(el("h3", {}, n.type === "fact" ? aokun.t("graph.the_fact") : aokun.t("graph.facts", {n: d.facts.length})));
    parts.push(el("ul", {id: "node-facts"}, ...d.facts.map(f => el("li", {className: "fact"}, f.text, el("br"), refs(f.memory_ids)))));
    if (d.entries.length) {
      parts.push(el("h3", {}, aokun.t("graph.entries")));
      parts.push(el("ul", {}, ...d.entries.map(e => el("li", {}, e.text, el("br"), refs([e.memory_id])))));
    }
    if (d.related.length) {
      parts.push(el("h3", {}, aokun.t("graph.linked", {n: d.related.length})));
      parts.push(el("ul", {id: "node-related"}, ...d.related.map(r => {
        const name = el("span", {className: "related-node", onclick: () => selectById(r.id)}, r.label);
        return el("li", {}, el("span", {className: `kind ${r.type}`}, kind(r.type)), " ", name,
                  el("span", {className: "refs"}, ` · ${aokun.t(`edge.${r.edge}`)} · ${memories(r.memories)}`));
      })));
    }
    const count = d.memories_total > d.memories.length
      ? aokun.t("graph.of", {shown: d.memories.length, total: d.memories_total}) : d.memories.length;
    parts.push(el("h3", {}, aokun.t("graph.sources", {n: count})));
    parts.push(el("ul", {id: "node-memories"}, ...d.memories.map(m => el("li", {}, memoryLink(m.id),
      m.archived ? ` (${aokun.t("archived")}) ` : " ", m.text))));
    panel.replaceChildren(...parts);
  }

  document.getElementById("find-form").addEventListener("submit", evt => {
    evt.preventDefault();
    const wanted = document.getElementById("find").value.trim().toLowerCase();
    const cy = window.aokunGraph.cy;
    if (!wanted || !cy) return;
    const hit = cy.nodes().filter(n => n.data("label").toLowerCase().includes(wanted)).sort((a, b) => b.data("degree") - a.data("degree"))[0];
    if (hit) selectById(hit.data("key"));
    else status.textContent = aokun.t("graph.no_match", {q: wanted});
  });

  window.aokunGraph = {cy: null, select: selectById};
  draw().catch(error => {
    status.textContent = error.message;
    status.className = "error";
    box.dataset.state = "failed";
  });
})();
