"use strict";
// Draws the timeline page from the JSON in #data (otel_a2a/analyze/page.py). DOM calls only:
// every name and state from the spans is set as text, never parsed as markup.
(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const STATES = {
    submitted: "#6baed6", working: "#2171b5", "input-required": "#f5a623",
    "auth-required": "#d35400", completed: "#27ae60", failed: "#c0392b",
    canceled: "#7d3c98", rejected: "#78281f", unknown: "#95a5a6",
  };
  const LIGHT = new Set(["submitted", "input-required", "unknown"]);
  const KINDS = {
    card: "card fetched", etag: "card etag changed", observation: "observation",
    decision: "liveness decision", divergence: "divergence (otel-a2a, in process)",
    finding: "finding (cross-runtime analysis)", note: "what the run did (no span)",
  };
  const LABEL_W = 180, RIGHT = 48, AXIS_H = 24, FLAG_H = 20, ROW_H = 18, POINT_H = 16;
  const WINDOW_H = 15;  // the row under a lane that names its blind windows
  const LANE_GAP = 6, MAX_ROWS = 4;
  const zoom = new Map();  // task id -> [from, to] in ms since the task's first time
  const picked = new Map();  // task id -> text of the mark clicked last
  const tip = document.getElementById("tip");
  let data = JSON.parse(document.getElementById("data").textContent);

  function el(name, attrs, parent) {
    const node = document.createElementNS(SVG, name);
    for (const key in attrs) node.setAttribute(key, attrs[key]);
    if (parent) parent.appendChild(node);
    return node;
  }
  function html(name, cls, text, parent) {
    const node = document.createElement(name);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    if (parent) parent.appendChild(node);
    return node;
  }
  function secs(ms) { return (ms / 1000).toFixed(3) + " s"; }
  function spanText(task, i) {
    if (i < 0) return "no span: the run itself says so";
    const s = task.spans[i];
    return "span: " + s[0] + "\nservice: " + s[1] + "\ntrace id: " + (s[2] || "-") +
      "\nspan id: " + (s[3] || "-");
  }
  function hoverable(node, task, text, details) {
    node.classList.add("hit");
    el("title", {}, node).textContent = text;
    node.dataset.hover = text;
    node.addEventListener("mousemove", (e) => {
      tip.textContent = text;
      tip.hidden = false;
      tip.style.left = Math.min(e.clientX + 14, window.innerWidth - 540) + "px";
      tip.style.top = (e.clientY + 14) + "px";
    });
    node.addEventListener("mouseleave", () => { tip.hidden = true; });
    node.addEventListener("click", (e) => {
      e.stopPropagation();
      picked.set(task.id, text);
      details.textContent = text;
      for (const other of node.ownerSVGElement.querySelectorAll(".picked")) {
        other.classList.remove("picked");
      }
      node.classList.add("picked");
    });
  }

  function niceStep(span) {
    const raw = span / 8;
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
    return 10 * p;
  }

  // consecutive bars of one lane with the same state and spelling that touch (within a
  // pixel or two at this zoom) are drawn as one: thousands of polls stay one readable bar
  function mergeBars(bars, tol) {
    const out = [];
    const open = new Map();
    for (const b of bars.slice().sort((p, q) => p[3] - q[3])) {
      const key = b[0];
      const cur = open.get(key);
      if (cur && cur.state === b[1] && cur.raw === b[2] && b[3] <= cur.end + tol) {
        cur.end = Math.max(cur.end, b[4]);
        cur.count += 1;
        cur.auth = cur.auth || b[5] === 1;
        continue;
      }
      const bar = { lane: b[0], state: b[1], raw: b[2], start: b[3], end: b[4],
        auth: b[5] === 1, span: b[6], count: 1 };
      out.push(bar);
      open.set(key, bar);
    }
    return out;
  }

  function drawTask(task, section) {
    for (const old of section.querySelectorAll("svg.chart, .details")) old.remove();
    const width = Math.max(section.clientWidth || 1200, 640);
    const details = html("div", "details");
    details.textContent = picked.get(task.id) || "Click a bar, point or flag to keep its span here.";
    let lo = 0, hi = 1;
    for (const b of task.bars) hi = Math.max(hi, b[4]);
    for (const m of task.marks) hi = Math.max(hi, m[2]);
    for (const w of task.windows) hi = Math.max(hi, w[2]);
    const z = zoom.get(task.id);
    if (z) { lo = z[0]; hi = z[1]; } else { hi = hi * 1.02 + 1; }
    const plot = width - LABEL_W - RIGHT;
    const x = (t) => LABEL_W + ((t - lo) / (hi - lo)) * plot;
    const tol = (hi - lo) * 2 / plot;
    const bars = mergeBars(task.bars.filter((b) => b[4] >= lo && b[3] <= hi), tol);

    // rows within each lane: overlapping beliefs of one service stack
    const rowsEnd = task.lanes.map(() => []);
    for (const b of bars) {
      const ends = rowsEnd[b.lane];
      const x0 = x(b.start);
      let row = ends.findIndex((end) => end <= x0);
      if (row < 0 && ends.length < MAX_ROWS) row = ends.length;
      if (row < 0) row = ends.indexOf(Math.min(...ends));
      ends[row] = Math.max(x(b.end), x0 + 4) + 1;
      b.row = row;
    }
    // room to the right of each bar in its row, for a label that does not fit inside
    const nextStart = new Map(), prevEnd = new Map();
    for (const b of bars.slice().sort((p, q) => q.start - p.start)) {
      const key = b.lane + "|" + b.row;
      b.room = nextStart.has(key) ? nextStart.get(key) : width - RIGHT;
      nextStart.set(key, x(b.start));
    }
    for (const b of bars) {
      const key = b.lane + "|" + b.row;
      b.left = prevEnd.has(key) ? prevEnd.get(key) : LABEL_W;
      prevEnd.set(key, Math.max(prevEnd.get(key) || 0, x(b.end)));
    }
    const windowed = new Set(task.windows.filter((w) => w[2] >= lo && w[1] <= hi).map((w) => w[0]));
    const laneH = (i) => FLAG_H + Math.max(1, rowsEnd[i].length) * ROW_H + POINT_H +
      (windowed.has(i) ? WINDOW_H : 0);
    const pointY = (i) => FLAG_H + Math.max(1, rowsEnd[i].length) * ROW_H + POINT_H / 2;
    const laneTop = [];
    let y = AXIS_H;
    task.lanes.forEach((_, i) => {
      laneTop.push(y);
      y += laneH(i) + LANE_GAP;
    });
    const height = y + 4;
    const svg = el("svg", { class: "chart", width: width, height: height,
      viewBox: "0 0 " + width + " " + height, role: "img" });
    svg.setAttribute("aria-label", "timeline of task " + task.id);
    const defs = el("defs", {}, svg);
    const hatch = el("pattern", { id: "hatch", width: 6, height: 6,
      patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" }, defs);
    el("rect", { width: 6, height: 6, fill: "rgba(231, 76, 60, 0.10)" }, hatch);
    el("line", { x1: 0, y1: 0, x2: 0, y2: 6, stroke: "rgba(192, 57, 43, 0.35)",
      "stroke-width": 2 }, hatch);

    const lanes = el("g", {}, svg);
    task.lanes.forEach((name, i) => {
      const top = laneTop[i];
      const h = laneH(i);
      const g = el("g", { class: "lane" }, lanes);
      g.dataset.service = name;
      el("rect", { class: "lane-bg", x: 0, y: top, width: width, height: h }, g);
      const label = el("text", { class: "lane-name", x: 6, y: top + h / 2 + 4 }, g);
      label.textContent = name.length > 26 ? name.slice(0, 25) + "…" : name;
      el("title", {}, label).textContent = name;
    });

    // axis: seconds since the task's first time
    const axis = el("g", { class: "axis" }, svg);
    const step = niceStep(hi - lo);
    for (let t = Math.ceil(lo / step) * step; t <= hi; t += step) {
      el("line", { x1: x(t), x2: x(t), y1: AXIS_H - 4, y2: height }, axis);
      el("text", { x: x(t) + 2, y: AXIS_H - 8 }, axis).textContent = "+" + secs(t);
    }

    // blind windows under everything else on their lane
    for (const w of task.windows) {
      if (w[2] < lo || w[1] > hi) continue;
      const top = laneTop[w[0]];
      const h = laneH(w[0]);
      const x0 = Math.max(x(w[1]), LABEL_W), x1 = Math.min(x(w[2]), width - RIGHT);
      const g = el("g", { class: "blind" }, svg);
      const rect = el("rect", { class: "window", x: x0, y: top, width: Math.max(x1 - x0, 2),
        height: h }, g);
      hoverable(rect, task, w[3] + "\nfrom +" + secs(w[1]) + " to +" + secs(w[2]), details);
      const label = el("text", { class: "window-label", x: x0 + 3, y: top + h - 3 }, g);
      label.textContent = w[3];
      if (x0 + 3 + w[3].length * 6.6 > width - RIGHT) {  // near the right edge: end at it
        label.setAttribute("x", Math.max(x1 - 3, LABEL_W));
        label.setAttribute("text-anchor", "end");
      }
    }

    const barLayer = el("g", {}, svg);
    for (const b of bars) {
      const top = laneTop[b.lane] + FLAG_H + b.row * ROW_H;
      const x0 = Math.max(x(b.start), LABEL_W), x1 = Math.min(x(b.end), width - RIGHT);
      const w = Math.max(x1 - x0, 4);
      const g = el("g", { class: "belief" }, barLayer);
      g.dataset.state = b.state;
      const rect = el("rect", { class: "bar" + (b.auth ? "" : " inferred"), x: x0, y: top + 2,
        width: w, height: ROW_H - 4, rx: 2, fill: STATES[b.state] || STATES.unknown }, g);
      const merged = b.count > 1 ? "\n" + b.count + " beliefs drawn as one bar" : "";
      const text = b.raw + " (" + b.state + ")" + merged + "\n" + task.lanes[b.lane] +
        " believed it from +" + secs(b.start) + " to +" + secs(b.end) + "\n" +
        (b.auth ? "authoritative observation" : "not authoritative") + "\n" +
        spanText(task, b.span);
      hoverable(rect, task, text, details);
      const label = b.raw + (b.count > 1 ? " ×" + b.count : "");
      const need = label.length * 6.6 + 8;
      if (w > need) {
        el("text", { class: "bar-label" + (LIGHT.has(b.state) ? " dark" : ""), x: x0 + 4,
          y: top + ROW_H - 5 }, g).textContent = label;
      } else if (b.room - (x0 + w) > need) {
        el("text", { class: "bar-label dark", x: x0 + w + 3, y: top + ROW_H - 5 }, g)
          .textContent = label;
      } else if (x0 - b.left > need) {
        el("text", { class: "bar-label dark", x: x0 - 3, y: top + ROW_H - 5,
          "text-anchor": "end" }, g).textContent = label;
      }
    }

    // points (at most one per kind, lane and 3 pixels) and flags (one per reason and 8 px)
    const seen = new Map();
    const flagText = task.lanes.map(() => -1);
    const noteText = task.lanes.map(() => -1);
    const markLayer = el("g", {}, svg);
    for (const m of task.marks) {
      const [kind, lane, t, label, detail, span] = m;
      if (t < lo || t > hi) continue;
      const flag = kind === "divergence" || kind === "finding";
      const px = x(t);
      const key = kind + "|" + lane + "|" + (flag ? label + "|" + Math.round(px / 8) :
        Math.round(px / 3));
      const known = seen.get(key);
      if (known) { known.count += 1; known.title.textContent = known.text + "\n(" +
        known.count + " marks here; zoom in to tell them apart)"; continue; }
      const top = laneTop[lane];
      const h = laneH(lane);
      const g = el("g", { class: "mark-group " + kind }, markLayer);
      g.dataset.kind = kind;
      let node;
      if (flag) {
        el("line", { class: "flag-pole", x1: px, x2: px, y1: top + 2, y2: top + pointY(lane) }, g);
        node = el("path", { class: "flag-head hit-target",
          d: "M" + px + " " + (top + 2) + " l10 4 l-10 4 z" }, g);
        if (px > flagText[lane]) {
          const text = el("text", { class: "flag-text", x: px + 12, y: top + 11 }, g);
          text.textContent = label;
          flagText[lane] = px + 12 + label.length * 6.6 + 6;
        }
      } else {
        const cy = top + pointY(lane);
        if (kind === "observation") node = el("circle", { class: "mark observation", cx: px, cy: cy, r: 3.5 }, g);
        else if (kind === "decision") node = el("path", { class: "mark decision",
          d: "M" + (px - 5) + " " + (cy + 5) + " L" + px + " " + (cy - 5) + " L" + (px + 5) + " " + (cy + 5) + " z" }, g);
        else if (kind === "etag") node = el("path", { class: "mark etag",
          d: "M" + px + " " + (cy - 6) + " l6 6 l-6 6 l-6 -6 z" }, g);
        else if (kind === "note") {
          node = el("rect", { class: "mark note", x: px - 1.5, y: top + 2, width: 3, height: h - 4 }, g);
          const low = px > noteText[lane];  // else above, beside the flags
          el("text", { class: "note-text", x: px + 5, y: low ? top + h - 4 : top + 12 }, g)
            .textContent = label;
          if (low) noteText[lane] = px + 5 + label.length * 6.2 + 6;
        } else node = el("rect", { class: "mark card", x: px - 4, y: cy - 4, width: 8, height: 8 }, g);
      }
      const text = (KINDS[kind] || kind) + ": " + label + (detail ? "\n" + detail : "") +
        "\nat +" + secs(t) + " on " + task.lanes[lane] + "\n" + spanText(task, span);
      hoverable(node, task, text, details);
      seen.set(key, { count: 1, text: text, title: node.querySelector("title") });
    }

    // drag to zoom, double-click to zoom out
    let drag = null, band = null;
    const at = (e) => {
      const box = svg.getBoundingClientRect();
      return (e.clientX - box.left) * (width / box.width);
    };
    svg.addEventListener("mousedown", (e) => {
      if (e.button !== 0) return;
      drag = at(e);
      band = el("rect", { x: drag, y: AXIS_H, width: 0, height: height - AXIS_H,
        fill: "rgba(52, 152, 219, 0.15)" }, svg);
    });
    svg.addEventListener("mousemove", (e) => {
      if (drag === null || !band) return;
      const now = at(e);
      band.setAttribute("x", Math.min(drag, now));
      band.setAttribute("width", Math.abs(now - drag));
    });
    svg.addEventListener("mouseup", (e) => {
      if (drag === null) return;
      const a = Math.max(Math.min(drag, at(e)), LABEL_W), b = Math.max(drag, at(e));
      drag = null;
      if (band) band.remove();
      if (b - a > 4) {
        const inv = (px) => lo + ((px - LABEL_W) / plot) * (hi - lo);
        zoom.set(task.id, [inv(a), inv(b)]);
        drawTask(task, section);
      }
    });
    svg.addEventListener("dblclick", () => { zoom.delete(task.id); drawTask(task, section); });
    section.appendChild(svg);
    section.appendChild(details);
  }

  function legend() {
    const box = document.getElementById("legend");
    box.replaceChildren();
    for (const state in STATES) {
      const item = html("span", "", undefined, box);
      const svg = el("svg", { width: 14, height: 10 }, item);
      el("rect", { width: 14, height: 10, rx: 2, fill: STATES[state] }, svg);
      item.appendChild(document.createTextNode(state));
    }
    for (const [cls, text] of [["divergence", "divergence flag"], ["finding", "finding flag"],
      ["observation", "observation"], ["decision", "decision"], ["card", "card fetch"],
      ["etag", "etag change"], ["window", "blind window"]]) {
      const item = html("span", "", undefined, box);
      const svg = el("svg", { width: 14, height: 12 }, item);
      if (cls === "window") el("rect", { width: 14, height: 12, fill: "rgba(231,76,60,0.25)",
        stroke: "#c0392b", "stroke-dasharray": "3 2" }, svg);
      else if (cls === "divergence" || cls === "finding") {
        const g = el("g", { class: cls }, svg);
        el("path", { class: "flag-head", d: "M2 1 l10 4 l-10 4 z" }, g);
      } else if (cls === "observation") el("circle", { class: "mark observation", cx: 7, cy: 6, r: 3.5 }, svg);
      else if (cls === "decision") el("path", { class: "mark decision", d: "M2 11 L7 1 L12 11 z" }, svg);
      else if (cls === "etag") el("path", { class: "mark etag", d: "M7 0 l6 6 l-6 6 l-6 -6 z" }, svg);
      else el("rect", { class: "mark card", x: 3, y: 2, width: 8, height: 8 }, svg);
      item.appendChild(document.createTextNode(text));
    }
  }

  function render() {
    const main = document.getElementById("tasks");
    main.replaceChildren();
    const summary = document.getElementById("summary");
    summary.replaceChildren();
    const count = data.tasks.length;
    summary.appendChild(document.createTextNode(
      count + (count === 1 ? " task" : " tasks") + " drawn" +
      (data.live ? " (live: redrawn every 2 s, read-only)" : "") + "; generated " + data.generated + ". "));
    if (data.omitted > 0) {
      html("span", "bounded", data.omitted + " more task(s) with findings are not drawn: the page is bounded.", summary);
    }
    if (!count) {
      html("p", "empty", data.live ? "No tracked task has a finding yet." :
        "No task with a finding (or none of the tasks asked for) in these spans.", main);
    }
    for (const task of data.tasks) {
      const section = html("section", "task", undefined, main);
      section.dataset.task = task.id;
      html("h2", "", "task " + task.id, section);
      const meta = task.lanes.length + " service(s), " + task.bars.length + " beliefs, " +
        task.marks.length + " marks; +0 s is " + task.t0 + " UTC.";
      const p = html("p", "meta", meta + " ", section);
      if (task.dropped > 0) {
        html("span", "bounded", task.dropped + " older beliefs or marks are not drawn (at most " +
          data.max_items + " of each are kept per task).", p);
      }
      drawTask(task, section);
    }
  }

  legend();
  render();
  let resizing = 0;
  window.addEventListener("resize", () => {
    clearTimeout(resizing);
    resizing = setTimeout(render, 150);
  });
  if (data.live) {
    setInterval(async () => {
      try {
        const answer = await fetch("data.json", { cache: "no-store" });
        if (!answer.ok) return;
        data = await answer.json();
        render();
      } catch (err) {
        // the detector stopped: keep the last picture
      }
    }, 2000);
  }
})();
