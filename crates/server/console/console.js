// The Causet web console: polls /status (the cluster as this node sees it) and /series (a sample a second, kept ten
// minutes) and draws them; with the node's admin token, cuts and heals the links to other DCs. Plain browser
// JavaScript with no build step; the only library is the vendored uPlot.
"use strict";

(function () {
  const STATUS_EVERY_MS = 1000;
  const SERIES_EVERY_MS = 1000;
  const KEEP = 600;
  const TOKEN_KEY = "causet-admin-token";
  const PALETTE = ["#3c6fd6", "#d6453c", "#1f9d55", "#d69e2e", "#805ad5", "#319795", "#b7791f", "#2d3748"];
  const STATE_LABEL = { up: "up", catching_up: "catching up", cut: "cut", partly_cut: "partly cut", down: "down" };

  const $ = (sel) => document.querySelector(sel);
  const el = (tag, attrs, ...children) => {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else if (v !== undefined && v !== null && v !== false) node.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return node;
  };
  const svg = (tag, attrs, ...children) => {
    const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return node;
  };
  const ms = (v) => (v === null || v === undefined ? "—" : v >= 10000 ? (v / 1000).toFixed(1) + " s" : Math.round(v) + " ms");

  let status = null;
  let token = sessionStorage.getItem(TOKEN_KEY);
  let operator = false;
  const banner = { status: null, series: null, action: null };

  function showBanner() {
    const msgs = Object.values(banner).filter(Boolean);
    const b = $("#banner");
    b.hidden = msgs.length === 0;
    b.textContent = msgs.join(" · ");
  }

  // ---- the operator's token -------------------------------------------------------------------------------
  async function checkToken(candidate) {
    const r = await fetch("/admin/token", { method: "POST", headers: { Authorization: "Bearer " + candidate } });
    return { ok: r.ok, message: (await r.text()).trim() };
  }

  function setOperator(on) {
    operator = on;
    const mode = $("#mode");
    mode.textContent = on ? "operator" : "read-only";
    mode.className = "badge " + (on ? "operator" : "readonly");
    $("#token").hidden = on;
    $("#unlock").hidden = on;
    $("#lock").hidden = !on;
    document.body.dataset.mode = on ? "operator" : "read-only";
    if (status) render();
  }

  $("#token-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const candidate = $("#token").value;
    if (!candidate) return;
    try {
      const r = await checkToken(candidate);
      if (r.ok) {
        token = candidate;
        sessionStorage.setItem(TOKEN_KEY, token);
        $("#token").value = "";
        banner.action = null;
        setOperator(true);
      } else {
        banner.action = "token refused: " + r.message;
      }
    } catch (err) {
      banner.action = "could not check the token: " + err.message;
    }
    showBanner();
  });
  $("#lock").addEventListener("click", () => {
    token = null;
    sessionStorage.removeItem(TOKEN_KEY);
    setOperator(false);
  });

  async function linkAction(dc, verb) {
    try {
      const r = await fetch(`/admin/links/${dc}/${verb}`, { method: "POST", headers: { Authorization: "Bearer " + token } });
      const text = (await r.text()).trim();
      banner.action = r.ok ? null : `${verb} DC ${dc}: ${text}`;
      if (r.status === 401) setOperator(false);
    } catch (err) {
      banner.action = `${verb} DC ${dc}: ${err.message}`;
    }
    showBanner();
    pollStatus();
  }

  // ---- the cluster ----------------------------------------------------------------------------------------
  function drawCluster() {
    const root = $("#cluster");
    root.replaceChildren();
    const width = root.clientWidth || 600;
    const height = root.clientHeight || 280;
    const dcs = [{ dc: status.dc, nodes: [...Array(status.nodes).keys()], own: true }].concat(
      status.peers.map((p) => ({ dc: p.dc, nodes: p.nodes, peer: p }))
    );
    const n = dcs.length;
    const [cx, cy] = [width / 2, height / 2];
    const [rx, ry] = [Math.max(0, width / 2 - 100), Math.max(0, height / 2 - 50)];
    dcs.forEach((d, i) => {
      const angle = Math.PI + (2 * Math.PI * i) / n;
      d.x = n === 1 ? cx : cx + rx * Math.cos(angle);
      d.y = n === 1 ? cy : cy + ry * Math.sin(angle) * (n === 2 ? 0 : 1);
    });
    const own = dcs[0];
    for (const d of dcs.slice(1)) {
      const state = d.peer.state;
      root.append(svg("line", { class: "link " + state, x1: own.x, y1: own.y, x2: d.x, y2: d.y, stroke: `var(--${state})`, "data-dc": d.dc }));
      const label = svg("text", { class: "link-label", x: (own.x + d.x) / 2, y: (own.y + d.y) / 2 - 6, "text-anchor": "middle", fill: `var(--${state})` },
        `${Math.round(d.peer.delay_ms)} ms · ${STATE_LABEL[state] || state}`);
      root.append(label);
    }
    const memberCut = new Set(status.links.filter((l) => l.dc === status.dc && l.cut).map((l) => l.node));
    for (const d of dcs) {
      const w = Math.max(130, 34 * d.nodes.length + 30);
      const g = svg("g", { class: "dc" + (d.own ? " own" : ""), "data-dc": d.dc, transform: `translate(${d.x - w / 2},${d.y - 34})` });
      g.append(svg("rect", { width: w, height: 68, rx: 8 }));
      g.append(svg("text", { x: 10, y: 18 }, `DC ${d.dc}` + (d.own ? " (here)" : "")));
      d.nodes.forEach((node, j) => {
        const me = d.own && node === status.node;
        const cut = d.own && memberCut.has(node);
        const ng = svg("g", { class: "node" + (me ? " me" : "") + (cut ? " cut" : ""), transform: `translate(${22 + j * 34},44)` });
        ng.append(svg("circle", { r: 10 }));
        ng.append(svg("text", { y: 22, "text-anchor": "middle" }, `n${node}`));
        g.append(ng);
      });
      root.append(g);
    }
  }

  // Rows are updated in place, keyed by `data-key`, so that a button stays the same element between refreshes (one
  // rebuilt every second could vanish under the pointer between press and release).
  function syncRows(body, rows) {
    const existing = new Map([...body.children].map((tr) => [tr.dataset.key, tr]));
    rows.forEach((row, i) => {
      let tr = existing.get(row.key);
      if (!tr) {
        tr = el("tr", Object.assign({ "data-key": row.key }, row.attrs || {}));
        row.cells.forEach(() => tr.append(el("td")));
        if (row.actions) tr.append(el("td", {}, ...row.actions()));
      }
      existing.delete(row.key);
      row.cells.forEach(([value, cls], j) => {
        const td = tr.children[j];
        const want = String(value);
        if (td.textContent !== want) td.textContent = want;
        if ((td.className || "") !== (cls || "")) td.className = cls || "";
      });
      if (row.update) row.update(tr);
      if (body.children[i] !== tr) body.insertBefore(tr, body.children[i] || null);
    });
    for (const tr of existing.values()) tr.remove();
  }

  function drawLinks() {
    const body = $("#links tbody");
    if (status.peers.length === 0) {
      syncRows(body, [{ key: "none", cells: [["a single DC: no links to other DCs", "muted"]] }]);
      return;
    }
    const canAct = operator && status.admin_enabled;
    const title = canAct ? "" : status.admin_enabled ? "unlock with the admin token to change links" : "this node has no admin token: read-only";
    syncRows(body, status.peers.map((p) => ({
      key: "dc" + p.dc,
      attrs: { "data-dc": p.dc },
      cells: [
        [`DC ${p.dc}`],
        [p.nodes.map((n) => "n" + n).join(" ")],
        [STATE_LABEL[p.state] || p.state, "state " + p.state],
        [ms(p.delay_ms), "num"],
        [ms(p.visibility_ms), "num"],
        [ms(p.replication_lag_ms), "num"],
      ],
      actions: () => [
        el("button", { class: "cut", onclick: () => linkAction(p.dc, "cut") }, "Cut"), " ",
        el("button", { class: "heal", onclick: () => linkAction(p.dc, "heal") }, "Heal"),
      ],
      update: (tr) => {
        const [cut, heal] = tr.querySelectorAll("button");
        cut.disabled = !canAct || p.state === "cut";
        heal.disabled = !canAct || (p.state !== "cut" && p.state !== "partly_cut");
        cut.title = heal.title = title;
      },
    })));
  }

  function drawNodes() {
    const rows = [];
    for (let node = 0; node < status.nodes; node++) {
      const link = status.links.find((l) => l.dc === status.dc && l.node === node);
      const linkText = node === status.node ? "this node" : !link ? "—" : link.cut ? "cut" : link.connected ? "connected" : "not connected";
      const served = status.partition_map.filter((p) => p.leader === node).length;
      const held = status.partition_map.filter((p) => p.nodes.includes(node)).length;
      rows.push({ key: "n" + node, attrs: { "data-node": node }, cells: [[`n${node}`], [linkText], [served, "num"], [held, "num"]] });
    }
    syncRows($("#nodes tbody"), rows);
  }

  function drawPartitions() {
    const here = new Map();
    for (const shard of status.shard_status) for (const p of shard.partitions) here.set(p.id, p);
    syncRows($("#partitions tbody"), status.partition_map.map((p) => {
      const local = here.get(p.partition);
      return {
        key: "p" + p.partition,
        attrs: { "data-partition": p.partition },
        cells: [
          [p.partition],
          [p.leader === null ? "no leader" : "n" + p.leader],
          [p.nodes.map((n) => "n" + n).join(" ")],
          [local ? local.objects : "—", "num"],
          [local ? local.versions : "—", "num"],
          [local ? local.replication_backlog : "—", "num"],
        ],
      };
    }));
  }

  function render() {
    $("#where").textContent = `DC ${status.dc} of ${status.dcs} · node ${status.node} of ${status.nodes} · ${status.partitions} partitions · ${status.clock} clock`;
    $("#updated").textContent = "updated " + new Date().toLocaleTimeString();
    if (!status.admin_enabled) {
      $("#token").hidden = $("#unlock").hidden = true;
      $("#mode").textContent = "read-only (the node has no admin token)";
    }
    drawCluster();
    drawLinks();
    drawNodes();
    drawPartitions();
    document.body.dataset.rendered = "yes";
  }

  async function pollStatus() {
    try {
      const r = await fetch("/status");
      if (!r.ok) throw new Error(`/status answered ${r.status}`);
      status = await r.json();
      banner.status = null;
      render();
    } catch (err) {
      banner.status = "the node does not answer: " + err.message;
    }
    showBanner();
  }

  // ---- the charts -----------------------------------------------------------------------------------------
  const points = { t: [], commits: [], aborts: [], requests: [], p50: [], p90: [], p99: [], open: [], stable: [], out: [], in: [], vis: new Map() };
  let since = 0;
  const charts = [];

  function chartSpecs() {
    const peers = [...points.vis.keys()].sort((a, b) => a - b);
    return [
      { id: "throughput", title: "Throughput (per second)", series: [["commits", "commits/s"], ["aborts", "aborts/s"], ["requests", "requests/s"]] },
      { id: "latency", title: "Client request latency (ms)", series: [["p50", "p50"], ["p90", "p90"], ["p99", "p99"]] },
      { id: "visibility", title: "Remote visibility per peer DC (ms)", series: peers.map((dc) => [["vis", dc], `DC ${dc}`]) },
      { id: "stable", title: "Stable-snapshot lag, this DC (ms)", series: [["stable", "lag"]] },
      { id: "backlog", title: "Replication backlog (transactions)", series: [["out", "not acknowledged by peers"], ["in", "received, waiting for dependencies"]] },
      { id: "open", title: "Open transactions", series: [["open", "open"]] },
    ];
  }
  const column = (key) => (Array.isArray(key) ? points.vis.get(key[1]) : points[key]);

  function buildCharts() {
    const root = $("#charts");
    for (const c of charts) {
      resizer.unobserve(c.box);
      c.plot.destroy();
    }
    charts.length = 0;
    root.replaceChildren();
    for (const spec of chartSpecs()) {
      const box = el("div", { class: "chart", id: "chart-" + spec.id, "data-points": 0 }, el("h3", {}, spec.title));
      root.append(box);
      const width = Math.max(300, box.clientWidth || 430);
      const opts = {
        width,
        height: 180,
        legend: { show: true },
        scales: { x: { time: true } },
        series: [{}].concat(spec.series.map(([, label], i) => ({ label, stroke: PALETTE[i % PALETTE.length], width: 1.5, spanGaps: false }))),
        axes: [{}, { size: 56 }],
      };
      const plot = new uPlot(opts, [points.t].concat(spec.series.map(([key]) => column(key))), box);
      charts.push({ spec, plot, box });
      resizer.observe(box);
    }
  }

  function trim(arr) {
    if (arr.length > KEEP) arr.splice(0, arr.length - KEEP);
  }

  async function pollSeries() {
    try {
      const r = await fetch("/series?since=" + since);
      if (!r.ok) throw new Error(`/series answered ${r.status}`);
      const body = await r.json();
      let rebuild = charts.length === 0;
      for (const s of body.samples) {
        for (const [dc] of s.visibility_ms) {
          if (!points.vis.has(dc)) {
            points.vis.set(dc, points.t.map(() => null));
            rebuild = true;
          }
        }
        points.t.push(s.t_ms / 1000);
        points.commits.push(s.commits_per_s);
        points.aborts.push(s.aborts_per_s);
        points.requests.push(s.requests_per_s);
        points.p50.push(s.p50_ms);
        points.p90.push(s.p90_ms);
        points.p99.push(s.p99_ms);
        points.open.push(s.open_transactions);
        points.stable.push(s.stable_lag_ms);
        points.out.push(s.replication_backlog);
        points.in.push(s.inbound_backlog);
        const vis = new Map(s.visibility_ms);
        for (const [dc, arr] of points.vis) arr.push(vis.has(dc) ? vis.get(dc) : null);
        since = Math.max(since, s.t_ms);
      }
      for (const key of Object.keys(points)) if (key !== "vis") trim(points[key]);
      for (const arr of points.vis.values()) trim(arr);
      if (rebuild) buildCharts();
      else for (const c of charts) c.plot.setData([points.t].concat(c.spec.series.map(([key]) => column(key))));
      // The chart's size and newest values, on the page (what a test or a curious operator can read back).
      for (const c of charts) {
        c.box.dataset.points = points.t.length;
        c.box.dataset.last = JSON.stringify(Object.fromEntries(c.spec.series.map(([key, label]) => {
          const values = column(key);
          return [label, values.length ? values[values.length - 1] : null];
        })));
      }
      banner.series = null;
    } catch (err) {
      banner.series = "no metrics history: " + err.message;
    }
    showBanner();
  }

  // Each chart fills its box, whatever the window's width (and the grid's columns) become.
  const resizer = new ResizeObserver((entries) => {
    for (const entry of entries) {
      const c = charts.find((c) => c.box === entry.target);
      const width = Math.max(300, Math.floor(entry.contentRect.width));
      if (c && c.plot.width !== width) c.plot.setSize({ width, height: 180 });
    }
  });
  window.addEventListener("resize", () => {
    if (status) drawCluster();
  });

  // ---- start ----------------------------------------------------------------------------------------------
  async function start() {
    if (token) {
      try {
        setOperator((await checkToken(token)).ok);
      } catch (err) {
        setOperator(false);
      }
    } else {
      setOperator(false);
    }
    await pollStatus();
    await pollSeries();
    setInterval(pollStatus, STATUS_EVERY_MS);
    setInterval(pollSeries, SERIES_EVERY_MS);
  }
  start();
})();
