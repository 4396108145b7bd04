// The plan as an SVG graph: the same picture as `baton plan --format mermaid`
// (inputs, one box per node, facet-labelled arrows, output), laid out in
// columns by longest path from the inputs, each node coloured by status.

const SVG = "http://www.w3.org/2000/svg";
const BOX_WIDTH = 190, BOX_HEIGHT = 68, COLUMN_GAP = 80, ROW_GAP = 26, MARGIN = 20;
const STATUS_FILL = {
  pending: "#e2e8f0", scheduled: "#bee3f8", running: "#bee3f8", completed: "#c6f6d5",
  failed: "#fed7d7", awaiting_human: "#fefcbf", deliberating: "#fefcbf", awaiting_hitl: "#fefcbf",
  skipped: "#f7fafc",
};

function element(name, attributes = {}, text) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

/** Arrows `{from, to, facets}`: producer edges, inputs → consumers, producers → output. */
function arrows(plan, supplied, goals) {
  const merged = new Map();
  const add = (from, to, facet) => {
    const key = `${from}\u0000${to}`;
    if (!merged.has(key)) merged.set(key, { from, to, facets: [] });
    const facets = merged.get(key).facets;
    if (!facets.includes(facet)) facets.push(facet);
  };
  for (const edge of plan.edges) add(edge.from, edge.to, edge.facet);
  for (const node of plan.nodes) {
    for (const facet of node.inputFacets || []) {
      const upstream = plan.edges.some((edge) => edge.to === node.nodeId && edge.facet === facet);
      if (!upstream && supplied.includes(facet)) add("inputs", node.nodeId, facet);
    }
  }
  for (const facet of goals) {
    const producers = plan.nodes.filter((node) => (node.outputFacets || node.provides || []).includes(facet));
    for (const producer of producers) {
      const consumed = plan.edges.some((edge) => edge.from === producer.nodeId && edge.facet === facet);
      if (!consumed || producers.length === 1) add(producer.nodeId, "output", facet);
    }
  }
  return [...merged.values()];
}

/** Column of every box: longest path from the inputs. */
function columns(plan, links) {
  const column = new Map([["inputs", 0]]);
  for (const node of plan.nodes) column.set(node.nodeId, 1);
  for (let pass = 0; pass < plan.nodes.length + 1; pass++) {
    for (const link of links) {
      if (link.to === "output") continue;
      const next = (column.get(link.from) || 0) + 1;
      if (next > (column.get(link.to) || 0)) column.set(link.to, next);
    }
  }
  const last = Math.max(1, ...plan.nodes.map((node) => column.get(node.nodeId)));
  column.set("output", last + 1);
  return column;
}

/**
 * Draws `plan` ({nodes, edges}) into an SVG element. `statuses` maps node id →
 * status; `onSelect(nodeId)` is called when a box is clicked.
 */
export function drawPlan(plan, { supplied, goals, statuses, selected, onSelect }) {
  const links = arrows(plan, supplied, goals);
  const column = columns(plan, links);
  const boxes = [{ id: "inputs", label: "inputs", sub: supplied.join(", ") },
    ...plan.nodes.map((node) => ({ id: node.nodeId, label: node.label || node.nodeId, sub: [node.capabilityId, node.agentType].filter(Boolean).join(" · "), node })),
    { id: "output", label: "output", sub: goals.join(", ") }];
  const rows = new Map();
  const position = new Map();
  for (const box of boxes) {
    const c = column.get(box.id);
    const row = rows.get(c) || 0;
    rows.set(c, row + 1);
    position.set(box.id, { x: MARGIN + c * (BOX_WIDTH + COLUMN_GAP), y: MARGIN + row * (BOX_HEIGHT + ROW_GAP) });
  }
  const width = MARGIN * 2 + (Math.max(...column.values()) + 1) * (BOX_WIDTH + COLUMN_GAP) - COLUMN_GAP;
  const height = MARGIN * 2 + Math.max(...rows.values()) * (BOX_HEIGHT + ROW_GAP) - ROW_GAP;
  const svg = element("svg", { class: "plan", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "plan graph" });
  svg.style.maxHeight = `${Math.max(height, 160)}px`;
  const defs = element("defs");
  const marker = element("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" });
  marker.append(element("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#a0aec0" }));
  defs.append(marker);
  svg.append(defs);
  for (const link of links) {
    const from = position.get(link.from), to = position.get(link.to);
    if (!from || !to) continue;
    const x1 = from.x + BOX_WIDTH, y1 = from.y + BOX_HEIGHT / 2, x2 = to.x, y2 = to.y + BOX_HEIGHT / 2;
    const middle = (x1 + x2) / 2;
    svg.append(element("path", { class: "edge", d: `M ${x1} ${y1} C ${middle} ${y1}, ${middle} ${y2}, ${x2} ${y2}`, "marker-end": "url(#arrow)" }));
    svg.append(element("text", { class: "edge-label", x: middle, y: (y1 + y2) / 2 - 4, "text-anchor": "middle" }, link.facets.join(", ")));
  }
  for (const box of boxes) {
    const { x, y } = position.get(box.id);
    const status = box.node ? (statuses[box.id] || "pending") : "io";
    const group = element("g", { class: `${box.node ? "node" : "io"}${box.id === selected ? " selected" : ""}`, "data-node-id": box.id, "data-status": status, transform: `translate(${x},${y})` });
    const fill = box.node ? (STATUS_FILL[status] || STATUS_FILL.pending) : "#e6fffa";
    group.append(element("rect", { width: BOX_WIDTH, height: BOX_HEIGHT, rx: box.node ? 6 : 24, fill }));
    group.append(element("text", { x: 10, y: 21, "font-weight": "600" }, truncate(box.label, 26)));
    group.append(element("text", { x: 10, y: 40, fill: "#5a6475" }, truncate(box.sub, 27)));
    // The catalog model the plan chose (none: the deployment's default). A
    // snapshot's node names it as {name, provider}; a plan frame by name only.
    const model = box.node && modelName(box.node.model);
    if (model) {
      group.append(element("text", { class: "node-model", x: 10, y: 58, fill: "#2b6cb0" }, truncate(model, 27)));
    }
    // A branch's node runs only when its guard holds: said on the box.
    if (box.node && box.node.guard) {
      group.append(element("text", { class: "node-guard", x: BOX_WIDTH - 8, y: 14, "text-anchor": "end", fill: "#975a16" }, "if …"));
    }
    if (box.node) {
      const guard = box.node.guard ? `\nruns if ${JSON.stringify(box.node.guard)}` : "";
      group.append(element("title", {}, `${box.id}: ${status}${guard}`));
      group.addEventListener("click", () => onSelect(box.id));
    }
    svg.append(group);
  }
  return svg;
}

function truncate(text, length) {
  const shown = String(text ?? "");
  return shown.length > length ? `${shown.slice(0, length - 1)}…` : shown;
}

/** A node's chosen model's name: `{name, provider}` (snapshots) or a name (plan frames). */
export function modelName(model) {
  if (!model) return null;
  return typeof model === "string" ? model : model.name || null;
}
