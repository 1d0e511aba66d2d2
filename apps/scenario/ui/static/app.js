// The live page of a scenario run: the topology with each link's rate in both directions,
// a panel per node, workloads over time, the timeline.  Live: a frame a second by server-sent
// events; replay: every frame at once, played with a slider.  Data from /api (server.py).
"use strict";

let topo = null;
let posOf = {};
let lastFrame = null;
let openNode = null;
let nodeTimer = null;

const RATE_BUCKETS = [
  { max: 0, color: "#c8ccd4", width: 1.5, label: "idle" },
  { max: 1e6, color: "#6aa84f", width: 2.5, label: "< 1 Mbit/s" },
  { max: 1e7, color: "#f1c232", width: 3.5, label: "< 10 Mbit/s" },
  { max: Infinity, color: "#cc4125", width: 5, label: ">= 10 Mbit/s" },
];

function fmtRate(bps) {
  if (!bps) return "0";
  if (bps >= 1e6) return (bps / 1e6).toFixed(2) + " Mbit/s";
  if (bps >= 1e3) return (bps / 1e3).toFixed(1) + " kbit/s";
  return bps.toFixed(0) + " bit/s";
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function linkRates(frame, link) {
  const dirs = (frame && frame.links && frame.links[link.name]) || {};
  const ab = dirs[link.a + ">" + link.b] || { bps: 0, pps: 0, dropped: 0 };
  const ba = dirs[link.b + ">" + link.a] || { bps: 0, pps: 0, dropped: 0 };
  return { ab, ba };
}

function drawTopology(frame) {
  const traces = RATE_BUCKETS.map((b) => ({
    x: [], y: [], mode: "lines", type: "scatter", hoverinfo: "skip",
    line: { color: b.color, width: b.width }, name: b.label, showlegend: true,
  }));
  // each link's rates both ways: written beside it on a small topology, on hover on a big one
  const labelled = topo.links.length <= 40;
  const mid = { x: [], y: [], text: [], hovertext: [], mode: labelled ? "markers+text" : "markers",
    type: "scatter", hoverinfo: "text", textposition: "middle right",
    textfont: { size: 10, color: "#555" },
    marker: { size: 6, color: "rgba(0,0,0,0.15)" }, name: "links", showlegend: false };
  for (const link of topo.links) {
    const { ab, ba } = linkRates(frame, link);
    const peak = Math.max(ab.bps, ba.bps);
    const bucket = RATE_BUCKETS.findIndex((b) => peak <= b.max);
    const [x0, y0] = posOf[link.a];
    const [x1, y1] = posOf[link.b];
    traces[bucket].x.push(x0, x1, null);
    traces[bucket].y.push(y0, y1, null);
    mid.x.push((x0 + x1) / 2);
    mid.y.push((y0 + y1) / 2);
    mid.hovertext.push(`${link.name} (${link.shaping})<br>${link.a}→${link.b}: ` +
      `${fmtRate(ab.bps)}<br>${link.b}→${link.a}: ${fmtRate(ba.bps)}`);
    mid.text.push(`${link.a}→${link.b} ${fmtRate(ab.bps)}<br>${link.b}→${link.a} ` +
      `${fmtRate(ba.bps)}<br>${link.shaping}`);
  }
  const names = topo.nodes.map((n) => n.name);
  const many = names.length > 60;
  const nodes = {
    x: topo.nodes.map((n) => n.pos[0]), y: topo.nodes.map((n) => n.pos[1]),
    text: names, customdata: names, mode: many ? "markers" : "markers+text",
    textposition: "top center", type: "scatter", hoverinfo: "text", name: "nodes",
    showlegend: false,
    // selected: blue; down (killed, not answering the sampler): red
    marker: { size: many ? 9 : 16, color: names.map((n) => n === openNode ? "#3c78d8"
      : frame && frame.nodes && frame.nodes[n] === null ? "#cc0000" : "#434343") },
  };
  const layout = {
    margin: { l: 10, r: 10, t: 10, b: 10 }, hovermode: "closest", dragmode: false,
    xaxis: { visible: false, range: [-0.08, 1.08] }, yaxis: { visible: false, range: [-0.08, 1.08] },
    legend: { orientation: "h", y: 0 },
  };
  const div = document.getElementById("topology");
  Plotly.react(div, [...traces, mid, nodes], layout, { displayModeBar: false, responsive: true });
  div.dataset.nodes = String(names.length);
  if (!div.dataset.clicks) {
    div.dataset.clicks = "1";
    div.on("plotly_click", (ev) => {
      const p = ev.points.find((q) => q.data.name === "nodes");
      if (p) showNode(p.customdata);
    });
  }
}

function fillLinks(frame) {
  const body = document.querySelector("#links tbody");
  for (const link of topo.links) {
    let row = document.getElementById("link-" + link.name);
    if (!row) {
      row = el("tr");
      row.id = "link-" + link.name;
      row.append(el("td", link.name), el("td", link.shaping), el("td", "", "num ab"),
        el("td", "", "num ba"), el("td", "", "num dropped"));
      body.append(row);
    }
    const { ab, ba } = linkRates(frame, link);
    const set = (cls, rate) => {
      const c = row.querySelector("." + cls);
      c.textContent = fmtRate(rate.bps);
      c.dataset.bps = String(rate.bps);
    };
    set("ab", ab);
    set("ba", ba);
    row.querySelector(".dropped").textContent = String((ab.dropped || 0) + (ba.dropped || 0));
    row.classList.toggle("active", ab.bps > 0 || ba.bps > 0);
  }
}

function drawCharts(frame) {
  const through = [];
  const lat = [];
  for (const [name, pts] of Object.entries(frame.workloads || {})) {
    const t = pts.map((p) => p.t);
    through.push({ x: t, y: pts.map((p) => p.ok), name: name + " ok/s", type: "scatter" });
    through.push({ x: t, y: pts.map((p) => p.failed), name: name + " failed/s", type: "scatter",
      line: { dash: "dot" } });
    lat.push({ x: t, y: pts.map((p) => p.p50_ms), name: name + " p50", type: "scatter" });
    lat.push({ x: t, y: pts.map((p) => p.p99_ms), name: name + " p99", type: "scatter",
      line: { dash: "dot" } });
  }
  const shapes = (frame.faults || []).map((f) => {
    const at = f.applied !== undefined && f.applied !== null ? f.applied : f.at;
    return { type: "line", x0: at, x1: at, yref: "paper", y0: 0, y1: 1,
      line: { color: "#cc4125", width: 1, dash: "dash" } };
  });
  // each fault named at its line, on both charts
  const annotations = (frame.faults || []).map((f) => ({
    x: f.applied !== undefined && f.applied !== null ? f.applied : f.at, y: 1, yref: "paper",
    text: f.action ? `${f.action} ${f.target}` : (f.text || "fault"), showarrow: false,
    xanchor: "left", yanchor: "top", font: { size: 10, color: "#cc4125" },
  }));
  const base = { margin: { l: 45, r: 10, t: 25, b: 30 }, shapes, annotations,
    xaxis: { title: { text: "s" }, range: [0, Math.max(topo.duration, frame.t)] } };
  Plotly.react("throughput", through, { ...base, title: { text: "requests per second" } },
    { displayModeBar: false });
  Plotly.react("latency", lat, { ...base, title: { text: "latency (ms)" } },
    { displayModeBar: false });
}

function fillEvents(frame) {
  const ul = document.getElementById("events");
  ul.replaceChildren(...(frame.events || []).map((e) => {
    const when = e.t === null || e.t === undefined ? "setup" : e.t.toFixed(2) + " s";
    return el("li", `${when}  ${e.text}`);
  }));
}

function update(frame) {
  lastFrame = frame;
  const clock = document.getElementById("clock");
  clock.textContent = `t = ${frame.t.toFixed(1)} s of ${topo.duration} s` + (frame.ended ? " (ended)" : "");
  clock.dataset.t = String(frame.t);
  drawTopology(frame);
  fillLinks(frame);
  drawCharts(frame);
  fillEvents(frame);
  if (!topo.live && openNode) showNode(openNode);
}

function rows(tbody, list) {
  tbody.replaceChildren(...list.map((cells) => {
    const tr = el("tr");
    for (const c of cells) tr.append(el("td", String(c)));
    return tr;
  }));
}

async function showNode(name) {
  openNode = name;
  const panel = document.getElementById("node-panel");
  panel.hidden = false;
  panel.dataset.node = name;
  document.getElementById("node-name").textContent = "node " + name;
  let info;
  try {
    const r = await fetch("/api/node/" + encodeURIComponent(name));
    info = await r.json();
  } catch (err) {
    info = { error: String(err) };
  }
  document.getElementById("node-error").textContent = info.error || (info.replay ? "replay: the counters of the moment shown" : "");
  let counters = info.counters || {};
  if (!topo.live && lastFrame && lastFrame.nodes && lastFrame.nodes[name]) counters = lastFrame.nodes[name];
  rows(document.querySelector("#node-counters tbody"),
    Object.entries(counters).filter(([, v]) => typeof v === "number").map(([k, v]) => [k, v]));
  rows(document.querySelector("#node-faces tbody"), (info.faces || []).map((f) => [
    f.face_id, f.uri || f.remote_uri,
    `${f.n_in_interests}/${f.n_in_data}/${f.n_in_nacks}`,
    `${f.n_out_interests}/${f.n_out_data}/${f.n_out_nacks}`,
    `${f.n_in_bytes}/${f.n_out_bytes}`,
  ]));
  rows(document.querySelector("#node-fib tbody"), (info.fib || []).map((e) => [
    e.name || e.prefix || "",
    (e.next_hop_records || e.nexthops || []).map((h) => `${h.face_id}(${h.cost})`).join(" "),
  ]));
  if (lastFrame) drawTopology(lastFrame);
  if (topo.live) {
    clearTimeout(nodeTimer);
    nodeTimer = setTimeout(() => { if (openNode === name) showNode(name); }, 1000);
  }
}

async function main() {
  topo = await (await fetch("/api/topology")).json();
  posOf = Object.fromEntries(topo.nodes.map((n) => [n.name, n.pos]));
  document.getElementById("title").textContent = "scenario " + topo.scenario;
  document.getElementById("mode").textContent = topo.live ? "live" : "replay";
  // replay: each expectation's verdict as the run's report gave it; live: what is expected
  const verdicts = topo.verdicts || [];
  document.getElementById("expectations").replaceChildren(...(verdicts.length
    ? verdicts.map((v) => el("li", (v.passed ? "✓ " : "✗ ") + v.text, v.passed ? "pass" : "fail"))
    : (topo.expectations || []).map((e) => el("li", e))));
  drawTopology(null);
  fillLinks(null);
  if (topo.live) {
    const es = new EventSource("/api/stream");
    es.onmessage = (m) => update(JSON.parse(m.data));
    es.addEventListener("ended", () => es.close());
    return;
  }
  const frames = await (await fetch("/api/frames")).json();
  const controls = document.getElementById("replay-controls");
  const slider = document.getElementById("slider");
  controls.hidden = false;
  slider.max = String(Math.max(0, frames.length - 1));
  slider.value = slider.max;
  slider.oninput = () => update(frames[Number(slider.value)]);
  let playing = null;
  document.getElementById("play").onclick = () => {
    if (playing) { clearInterval(playing); playing = null; return; }
    slider.value = "0";
    update(frames[0]);
    playing = setInterval(() => {
      const i = Number(slider.value) + 1;
      if (i >= frames.length) { clearInterval(playing); playing = null; return; }
      slider.value = String(i);
      update(frames[i]);
    }, 1000);
  };
  if (frames.length) update(frames[frames.length - 1]);
}

main();
