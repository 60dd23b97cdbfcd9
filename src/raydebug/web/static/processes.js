// Processes and their merged stacks (GET /api/processes, GET /api/stacks), paused and
// continued by group (POST /api/pause, POST /api/continue).
// The filter takes the CLI's selectors (`rank=0-3 actor=Trainer`); the stacks are drawn as
// an icicle: outermost frame on top, each box as wide as the threads that share it.

import { ApiError, getJson, postJson } from "./api.js";
import { age, basename, el, nodeName, program } from "./format.js";

const POLL_MS = 2000;
const ROW_PX = 28;

function terms(text) {
  return text.split(/\s+/).filter(Boolean);
}

function query(selector, extra = {}) {
  const parameters = new URLSearchParams();
  for (const term of selector) {
    const at = term.indexOf("=");
    parameters.append(at < 0 ? term : term.slice(0, at), at < 0 ? "" : term.slice(at + 1));
  }
  for (const [name, value] of Object.entries(extra)) parameters.set(name, value);
  const text = parameters.toString();
  return text ? `?${text}` : "";
}

function groupKey(process) {
  return [process.job_id ? `job ${process.job_id}` : "no job",
    `node ${nodeName(process) || "?"}`,
    process.actor_class ? `actor ${process.actor_class}` : null].filter(Boolean).join(" · ");
}

export class Processes {
  constructor(app) {
    this.app = app;
    this.timer = null;
    this.records = new Map();
    this.tree = null;
    this.selected = null;
    this.$ = (id) => document.getElementById(id);
    this.$("filter-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.refresh(true);
    });
    this.$("btn-pause-group").addEventListener("click", () => this.pauseGroup());
    this.$("btn-continue-group").addEventListener("click", () => this.continueGroup());
  }

  get selector() {
    return terms(this.$("filter-input").value);
  }

  start() {
    if (this.timer) return;
    this.refresh(true);
  }

  stop() {
    clearTimeout(this.timer);
    this.timer = null;
  }

  // The process list is polled; the stacks are read on Refresh (each read asks every
  // selected process for its stacks).
  async refresh(withStacks) {
    clearTimeout(this.timer);
    try {
      // What Ray workers run now is asked of each of them (seconds at 10,000 links): only
      // on Refresh, not on every poll.
      const processes = await getJson(`/api/processes${query(this.selector,
        withStacks ? {} : { now: "0" })}`);
      this.$("processes-error").textContent = "";
      this.records = new Map(processes.map((process) => [process.id, process]));
      this.renderProcesses(processes);
      if (withStacks) await this.loadStacks();
    } catch (error) {
      this.showError(error);
    }
    this.timer = setTimeout(() => this.refresh(false), POLL_MS);
  }

  showError(error) {
    if (!(error instanceof ApiError)) {
      this.app.failed(error);
      return;
    }
    const known = error.body?.known;
    this.$("processes-error").textContent = error.status === 404
      ? "This hub does not list live processes." : error.message
        + (known?.length ? ` (there are: ${known.slice(0, 5).join("; ")})` : "");
  }

  renderProcesses(processes) {
    this.$("processes-count").textContent = `(${processes.length})`;
    const groups = new Map();
    for (const process of processes) {
      const key = groupKey(process);
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(process);
    }
    const rank = (p) => Number(p.labels?.RANK ?? Number.MAX_SAFE_INTEGER);
    this.$("processes").replaceChildren(...[...groups.entries()].sort().map(([key, members]) =>
      el("section", { class: "panel group", "aria-label": key },
        el("h2", {}, key, el("span", { class: "count" }, ` (${members.length})`)),
        el("div", { class: "table-wrap" }, el("table", {},
          el("thead", {}, el("tr", {}, ...["PID", "Rank", "State", "Running", "Age", "Sessions"]
            .map((name) => el("th", { scope: "col", class: headerClass(name) }, name)))),
          el("tbody", {}, ...members.sort((a, b) => rank(a) - rank(b) || a.pid - b.pid)
            .map((process) => this.processRow(process))))))));
  }

  processRow(process) {
    const sessions = (process.sessions || []).map((id) =>
      el("a", { href: `#/session/${encodeURIComponent(id)}` }, id));
    return el("tr", { "data-process": process.id },
      el("td", { class: "num" }, process.pid),
      el("td", { class: "num" }, process.labels?.RANK ?? ""),
      el("td", { class: `state-${process.state}` }, process.state),
      el("td", {}, process.task_name || process.actor_class || program(process.argv || [])),
      el("td", { class: "num" }, age(process.since)),
      el("td", {}, ...sessions.flatMap((link, index) => (index ? [", ", link] : [link]))));
  }

  // -- merged stacks -----------------------------------------------------------------------

  async loadStacks() {
    const answer = await getJson(`/api/stacks${query(this.selector,
      { locals: "1", timeout: "2" })}`);
    for (const entry of answer.processes || []) {
      this.records.set(entry.process.id, entry.process);
    }
    this.tree = answer.tree || {};
    this.selected = null;
    this.drawIcicle();
    this.$("group-detail").replaceChildren();
  }

  drawIcicle() {
    const box = this.$("icicle");
    const root = this.tree?.root;
    if (!root || !root.children?.length) {
      box.replaceChildren(el("p", { class: "empty" }, "No stacks (no live process selected)."));
      box.style.height = "";
      this.$("stacks-missing").textContent = "";
      return;
    }
    const cells = [];
    let depth = 0;
    const place = (node, left, width, level) => {
      depth = Math.max(depth, level + 1);
      const count = node.count?.threads ?? 0;
      const where = node.line ? `:${node.line}` : "";
      const cell = el("button", {
        type: "button", role: "treeitem", "aria-level": level + 1,
        class: `icicle-cell${node.odd ? " odd" : ""}`, "aria-selected": "false",
        title: `${node.function} (${basename(node.file)}${where}): ${node.label || ""}`,
        "aria-label": `${node.function} ${basename(node.file)}${where}, ${count} threads`
          + `${node.odd ? ", odd group" : ""}`,
      }, `${node.function} ×${count}`);
      cell.style.left = `${left}%`;
      cell.style.width = `calc(${width}% - 2px)`;
      cell.style.top = `${level * ROW_PX}px`;
      cell.addEventListener("click", () => this.select(node, cell));
      cells.push(cell);
      let at = left;
      const total = node.count?.threads || 1;
      for (const child of node.children || []) {
        const share = width * ((child.count?.threads ?? 0) / total);
        place(child, at, share, level + 1);
        at += share;
      }
    };
    const total = root.children.reduce((sum, child) => sum + (child.count?.threads ?? 0), 0) || 1;
    let at = 0;
    for (const child of root.children) {
      const share = 100 * ((child.count?.threads ?? 0) / total);
      place(child, at, share, 0);
      at += share;
    }
    box.replaceChildren(...cells);
    box.style.height = `${depth * ROW_PX + 4}px`;
    const missing = this.tree.not_answering || [];
    this.$("stacks-missing").textContent = missing.length
      ? `${missing.length} processes did not answer: `
        + missing.map((m) => `pid ${m.pid} (${m.reason})`).join(", ") : "";
  }

  select(node, cell) {
    this.selected = node;
    for (const other of this.$("icicle").querySelectorAll("[aria-selected=true]")) {
      other.setAttribute("aria-selected", "false");
    }
    cell.setAttribute("aria-selected", "true");
    const processes = (node.processes || []).map((id) => this.records.get(id) || { id });
    const locals = Object.entries(node.locals || {});
    this.$("group-detail").replaceChildren(el("section", { class: "panel" },
      el("h2", {}, `${node.function} · ${basename(node.file)}${node.line ? `:${node.line}` : ""}`),
      node.code ? el("pre", {}, node.code) : null,
      el("p", {}, node.label || ""),
      el("div", { class: "table-wrap" }, el("table", { "aria-label": "Processes in this group" },
        el("thead", {}, el("tr", {}, ...["PID", "Rank", "Node", "State", "Sessions"].map((name) =>
          el("th", { scope: "col", class: headerClass(name) }, name)))),
        el("tbody", {}, ...processes.map((process) => el("tr", {},
          el("td", { class: "num" }, process.pid ?? ""),
          el("td", { class: "num" }, process.labels?.RANK ?? ""),
          el("td", {}, nodeName(process)),
          el("td", { class: `state-${process.state}` }, process.state ?? ""),
          el("td", {}, ...(process.sessions || []).map((id) =>
            el("a", { href: `#/session/${encodeURIComponent(id)}` }, `${id} `)))))))),
      locals.length ? el("h2", {}, "Locals") : null,
      locals.length ? el("ul", { class: "tree", role: "tree", "aria-label": "Locals" },
        ...locals.map(([name, values]) => el("li", { role: "treeitem" },
          el("span", { class: "label" }, el("span", { class: "name" }, name), " = ",
            values.map((v) => `${v.value} (${v.threads})`).join(", "))))) : null));
  }

  // The selectors of the group to pause or continue: one per process of the clicked group,
  // else the filter's (a filter is needed: pausing a whole cluster by accident would stop
  // every job). None (and said why) when there is neither.
  groupSelectors(verb) {
    const targets = this.selected
      ? (this.selected.processes || []).map((id) => this.records.get(id)).filter(Boolean)
        .map((process) => [`pid=${process.pid}`, `host=${process.host}`])
      : (this.selector.length ? [this.selector] : []);
    if (!targets.length) {
      this.$("processes-error").textContent =
        `Select a group in the stacks, or filter the processes, to ${verb} them.`;
      return null;
    }
    return targets;
  }

  said(text) {
    this.$("processes-error").textContent = "";
    this.$("group-detail").prepend(el("p", { role: "status" }, text));
    this.refresh(false);
  }

  async pauseGroup() {
    const targets = this.groupSelectors("pause");
    if (!targets) return;
    try {
      const paused = (await postEach("/api/pause", targets)).flatMap((answer) =>
        [...(answer.paused || []), ...(answer.already_paused || [])]);
      this.said(`Paused ${paused.length} processes: each thread is in the Sessions list ` +
        "once it has stopped (a thread blocked in C stops when it returns to Python).");
    } catch (error) {
      this.showError(error);
    }
  }

  // Every paused thread of the group runs on (as `raydebug continue`); a process a
  // debugger is attached to is left to it, and said.
  async continueGroup() {
    const targets = this.groupSelectors("continue");
    if (!targets) return;
    try {
      const answers = await postEach("/api/continue", targets);
      const resumed = answers.flatMap((answer) => answer.resumed || []);
      const missed = answers.flatMap((answer) => answer.not_resumed || []);
      const processes = new Set(resumed.map((session) => session.process)).size;
      this.said(`Continued ${plural(resumed.length, "session")} in ` +
        `${plural(processes, "process", "processes")}.` +
        missed.map((session) => ` Not ${session.id} (pid ${session.pid}): ` +
          `${session.reason}.`).join(""));
    } catch (error) {
      this.showError(error);
    }
  }
}

// Each selector POSTed to `path` in turn (one process each, for a clicked group); the answers.
async function postEach(path, targets) {
  const answers = [];
  for (const selector of targets) answers.push(await postJson(path, { selector }));
  return answers;
}

function plural(count, one, many = `${one}s`) {
  return `${count} ${count === 1 ? one : many}`;
}

// Numbers are right-aligned (class num), and so are their columns' headers.
function headerClass(name) {
  return ["PID", "Rank", "Age"].includes(name) ? "num" : "";
}

