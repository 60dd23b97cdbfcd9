// The debugger of one session: the page is a DAP client over the hub's WebSocket.
// Source comes from the worker (a `source` request, or linecache through `evaluate`), so
// code that exists only on the worker's node shows too. A snapshot opens here read-only
// (the hub serves it: its captured frames, values and source; no steps, no breakpoints).

import { getJson, postJson } from "./api.js";
import { DapSocket } from "./dap.js";
import { BLOCKED_IN_C, basename, decodeBase64Repr, el, labelsText, sessionName } from "./format.js";
import { Tree } from "./tree.js";

const WEB_PAGE = "web page"; // the hub's name for the page's cluster breakpoints
// A logpoint with this message is a snapshot point (raydebug.snapshots.format): each hit
// in a process is captured for the hub, never paused at; the gutter's takes the first.
const SNAPSHOT_POINT = { logMessage: "{snapshot}", hitCondition: "<=1" };

const MAX_OUTPUT = 200_000; // characters kept in the output panel

// The thread returned from where it paused and runs on; pydevd will not stop it again.
const SESSION_ENDED = "the process continued; session ended";

function sourceExpression(path) {
  // base64: pydevd answers a str with its repr, and base64 needs no unescaping
  return "__import__('base64').b64encode(''.join(__import__('linecache').getlines("
    + `${JSON.stringify(path)})).encode()).decode()`;
}

export class Debugger {
  constructor(app) {
    this.app = app;
    this.dap = null;
    this.sources = new Map(); // path -> lines, as the worker has them
    this.breakpoints = new Map(); // path -> Map of line -> "breakpoint" or "snapshot"
    this.watches = [];
    this.history = [];
    this.historyAt = 0;
    this.$ = (id) => document.getElementById(id);
    this.variables = new Tree(this.$("variables"), (ref) => this.children(ref));
    this.watchTree = new Tree(this.$("watches"), (ref) => this.children(ref));
    this.bindControls();
  }

  bindControls() {
    const step = (command) => () => this.resume(command);
    this.$("btn-continue").addEventListener("click", step("continue"));
    this.$("btn-next").addEventListener("click", step("next"));
    this.$("btn-step-in").addEventListener("click", step("stepIn"));
    this.$("btn-step-out").addEventListener("click", step("stepOut"));
    this.$("btn-pause").addEventListener("click", () => this.pause());
    this.$("btn-detach").addEventListener("click", () => this.detach());
    this.$("thread-select").addEventListener("change", (event) =>
      this.showThread(Number(event.target.value)));
    this.$("console-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.evaluateConsole();
    });
    this.$("console-input").addEventListener("keydown", (event) => this.historyKey(event));
    this.$("watch-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const input = this.$("watch-input");
      if (input.value.trim()) {
        this.watches.push(input.value.trim());
        input.value = "";
        this.renderWatches();
      }
    });
  }

  // -- the session's life ----------------------------------------------------------------

  async open(id, record) {
    this.close();
    this.id = id;
    this.record = record;
    // A snapshot: read-only (the hub refuses steps; the page does not offer them).
    this.readOnly = Boolean(record?.snapshot);
    this.blocked = Boolean(record?.blocked_in_c);
    this.threadId = null;
    this.frame = null;
    this.paused = false;
    this.sources.clear();
    const labels = record ? labelsText(record) : "";
    const named = record ? `${sessionName(record)} · pid ${record.pid}` +
      (labels ? ` · ${labels}` : "") : `session ${id}`;
    this.$("debugger-title").textContent = !this.readOnly ? named
      : `snapshot ${id}` + (!record.pid ? "" : named.startsWith("pid ") ? ` · pid ${record.pid}`
        : ` · ${named}`);
    this.$("btn-detach").textContent = this.readOnly ? "Close" : "Detach";
    this.$("btn-detach").title = this.readOnly ? "Close the snapshot"
      : "Disconnect: every thread of the process runs on";
    window.scrollTo(0, 0); // a session opens at its header, wherever the list was
    this.endedWith = null;
    this.$("session-ended").hidden = true;
    this.$("output").textContent = "";
    this.$("console-log").replaceChildren();
    this.$("stack").replaceChildren();
    this.$("source").replaceChildren();
    this.variables.clear();
    this.setState("attaching…", false);
    this.showException(record);
    const dap = new DapSocket();
    this.dap = dap;
    dap.on("output", (body) => this.output(body));
    dap.on("stopped", (body) => this.stopped(body));
    dap.on("continued", () => {
      this.blocked = false; // back from C (or let go): an ordinary thread from now on
      this.running();
    });
    dap.on("terminated", () => this.ended("the process has ended"));
    dap.on("exited", () => this.ended("the process has ended"));
    dap.on("raydebug/sessionEnded", (body) => {
      if (body.session === this.id) this.ended(SESSION_ENDED);
    });
    dap.on("close", (body) => {
      // After the session's end (or the process's), the hub's closing says nothing new.
      if (this.dap === dap && !this.endedWith) this.ended(`disconnected: ${body.reason}`);
    });
    try {
      await dap.connect();
      await dap.attach(id);
      this.markBreakpoints((await getJson("/api/breakpoints")).breakpoints || []);
    } catch (error) {
      if (this.dap === dap) this.ended(`cannot attach: ${error.message}`);
    }
  }

  close() {
    // Leaving the page keeps a paused thread paused (the session waits for the next
    // client); a running process is let go with disconnect.
    const dap = this.dap;
    this.dap = null;
    if (!dap) return;
    if (!this.paused && !dap.closed) {
      dap.request("disconnect", {}, 2000).finally(() => dap.close());
    } else {
      dap.close();
    }
  }

  setState(text, paused) {
    this.paused = paused;
    this.$("debugger-state").textContent = text;
    for (const id of ["btn-continue", "btn-next", "btn-step-in", "btn-step-out"]) {
      this.$(id).disabled = !paused || this.readOnly;
    }
    this.$("btn-pause").disabled = paused || !this.dap || this.endedWith || this.readOnly;
    this.$("console-input").disabled = !paused;
    this.$("console-form").querySelector("button").disabled = !paused;
  }

  ended(why) {
    this.endedWith = why;
    this.setState(why, false);
    this.$("btn-pause").disabled = true;
    this.$("btn-detach").disabled = true;
    this.$("session-ended").hidden = false;
    this.offerNext();
  }

  // Once this session has ended: a link to the longest-waiting other session, if any (the
  // list is polled: called again at each of its updates).
  offerNext() {
    if (!this.endedWith) return;
    const next = this.app.sessions.sessions.filter((session) => session.id !== this.id
      && session.state === "waiting").sort((a, b) => a.since - b.since)[0];
    const link = this.$("next-session");
    link.hidden = !next;
    if (next) {
      link.href = `#/session/${encodeURIComponent(next.id)}`;
      link.textContent = `Next session: ${sessionName(next)} · pid ${next.pid}`;
    }
  }

  running() {
    this.setState("running", false);
    this.$("source").querySelector(".current")?.classList.remove("current");
  }

  async resume(command) {
    if (!this.threadId) return;
    const threadId = this.threadId;
    this.running();
    try {
      await this.dap.request(command, { threadId });
    } catch (error) {
      this.consoleLine(`${command}: ${error.message}`, "error");
    }
  }

  async pause() {
    try {
      await this.dap.request("pause", { threadId: this.threadId || 0 });
    } catch (error) {
      this.consoleLine(`pause: ${error.message}`, "error");
    }
  }

  async detach() {
    if (!this.dap) return;
    try {
      await this.dap.request("disconnect", {}, 5000);
    } catch (_) {
      // the hub closes anyway
    }
    this.ended(this.readOnly ? "closed" : "detached: every thread runs on");
    this.dap.close();
  }

  // -- a stop ------------------------------------------------------------------------------

  async stopped(body) {
    this.endedWith = null;
    this.$("session-ended").hidden = true;
    this.$("btn-detach").disabled = false;
    this.threadId = body.threadId || this.threadId;
    this.stopReason = body.reason || "stopped";
    this.setState(this.readOnly ? `snapshot (${this.stopReason}), read-only: values as captured`
      : `paused (${this.stopReason})`, true);
    try {
      const { threads } = await this.dap.request("threads");
      this.threadNames = new Map(threads.map((thread) => [thread.id, thread.name]));
      const select = this.$("thread-select");
      select.replaceChildren(...threads.map((thread) =>
        el("option", { value: thread.id, selected: thread.id === this.threadId },
          `${thread.name} (${thread.id})`)));
      await this.showThread(this.threadId);
      if (this.record?.reason === "exception") await this.loadTraceback();
    } catch (error) {
      this.consoleLine(error.message, "error");
    }
  }

  async showThread(threadId) {
    this.threadId = threadId;
    if (this.paused && !this.readOnly) {
      // The session's own thread, still blocked in C, says what that means.
      const blocked = this.blocked && this.threadNames?.get(threadId) === this.record?.thread;
      this.setState(`paused (${this.stopReason})` + (blocked ? ` · ${BLOCKED_IN_C}` : ""), true);
    }
    const { stackFrames } = await this.dap.request("stackTrace", { threadId, levels: 200 });
    const list = this.$("stack");
    list.replaceChildren(...stackFrames.map((frame, index) => {
      const button = el("button", { type: "button", class: "frame" },
        el("span", { class: "fn" }, frame.name),
        el("span", { class: "sub" }, ` ${basename(frame.source?.path)}:${frame.line}`));
      button.addEventListener("click", () => this.selectFrame(frame, button));
      return el("li", { "data-index": index }, button);
    }));
    if (stackFrames.length) {
      await this.selectFrame(stackFrames[0], list.querySelector("button"));
    }
  }

  async selectFrame(frame, button) {
    this.frame = frame;
    for (const other of this.$("stack").querySelectorAll("button")) {
      other.removeAttribute("aria-current");
    }
    button?.setAttribute("aria-current", "true");
    await Promise.all([this.showSource(frame), this.showVariables(frame), this.renderWatches()]);
  }

  async showVariables(frame) {
    const { scopes } = await this.dap.request("scopes", { frameId: frame.id });
    this.variables.clear();
    for (const [index, scope] of scopes.entries()) {
      await this.variables.add({ name: scope.name, value: "", ref: scope.variablesReference,
        expand: index === 0 });
    }
  }

  async children(ref) {
    const { variables } = await this.dap.request("variables", { variablesReference: ref });
    return variables.map((variable) => ({
      name: variable.name, value: variable.value, type: variable.type,
      ref: variable.variablesReference,
    }));
  }

  // -- source and breakpoints --------------------------------------------------------------

  async lines(frame) {
    const source = frame.source || {};
    const path = source.path || "";
    if (this.sources.has(path)) return this.sources.get(path);
    let text = null;
    try {
      if (source.sourceReference) {
        text = (await this.dap.request("source", { source,
          sourceReference: source.sourceReference })).content;
      } else if (path) {
        const answer = await this.dap.request("evaluate", { expression: sourceExpression(path),
          frameId: frame.id, context: "clipboard" });
        text = decodeBase64Repr(answer.result);
      }
    } catch (error) {
      text = null;
    }
    const lines = text ? text.replace(/\n$/, "").split("\n") : null;
    if (lines) this.sources.set(path, lines);
    return lines;
  }

  async showSource(frame) {
    const path = frame.source?.path || "";
    this.$("source-path").textContent = path;
    const lines = await this.lines(frame);
    const box = this.$("source");
    if (!lines) {
      box.replaceChildren(el("p", { class: "empty" }, `No source for ${path || frame.name}`));
      return;
    }
    const marks = this.breakpoints.get(path) || new Map();
    const list = el("ol", { class: "code" });
    lines.forEach((text, index) => {
      const number = index + 1;
      const gutter = el("button", { type: "button", class: "gutter",
        "aria-label": `Breakpoint at line ${number}`,
        title: "Click: a breakpoint. Shift+click: a snapshot point (captures, never pauses)",
        "aria-pressed": marks.has(number) ? "true" : "false",
        "data-kind": marks.get(number) || "" }, number);
      gutter.addEventListener("click", (event) => this.toggleBreakpoint(
        path, number, gutter, event.shiftKey ? "snapshot" : "breakpoint"));
      const line = el("li", { "data-line": number, class: number === frame.line ? "current" : "" },
        gutter, el("code", {}, text || " "));
      if (number === frame.line) line.setAttribute("aria-current", "true");
      list.append(line);
    });
    box.replaceChildren(list);
    const current = box.querySelector(".current");
    if (current) {
      // The box alone scrolls to the line (scrollIntoView would scroll the page too, and a
      // post-mortem's exception panel puts the box low enough to cut the header off).
      const offset = current.getBoundingClientRect().top - box.getBoundingClientRect().top;
      box.scrollTop += offset - (box.clientHeight - current.offsetHeight) / 2;
    }
  }

  // The gutter's breakpoints are the cluster's (the hub arms them in every linked process,
  // as an IDE's on its cluster session): the page owns its own lines. The hub gives this
  // process's pydevd the whole breakpoint set while the page debugs it, and follows it.
  // `kind`: "breakpoint", or "snapshot" for a snapshot point (Shift+click); the same kind
  // again takes it back, the other replaces it.
  async toggleBreakpoint(path, line, gutter, kind = "breakpoint") {
    if (this.readOnly) return; // a snapshot's lines are what ran: nothing runs them again
    const marks = this.breakpoints.get(path) || new Map();
    if (marks.get(line) === kind) marks.delete(line);
    else marks.set(line, kind);
    this.breakpoints.set(path, marks);
    gutter.setAttribute("aria-pressed", marks.has(line) ? "true" : "false");
    gutter.dataset.kind = marks.get(line) || "";
    try {
      const answer = await postJson("/api/breakpoints", {
        source: { path },
        breakpoints: [...marks].map(([number, what]) => (what === "snapshot"
          ? { line: number, ...SNAPSHOT_POINT } : { line: number })),
      });
      this.markBreakpoints(answer.breakpoints || [], [path]);
    } catch (error) {
      this.consoleLine(`setBreakpoints: ${error.message}`, "error");
    }
  }

  // `listing`: the hub's cluster breakpoints (GET /api/breakpoints). Marks the page's own
  // (`also`: files to mark even with none left).
  markBreakpoints(listing, also = []) {
    const byPath = new Map(also.map((path) => [path, []]));
    for (const breakpoint of listing) {
      if (!byPath.has(breakpoint.path)) byPath.set(breakpoint.path, []);
      byPath.get(breakpoint.path).push(breakpoint);
    }
    for (const [path, breakpoints] of byPath) {
      this.breakpoints.set(path, new Map(breakpoints.filter((b) => b.client === WEB_PAGE)
        .map((b) => [b.line, (b.logMessage || "").trim() === SNAPSHOT_POINT.logMessage
          ? "snapshot" : "breakpoint"])));
    }
  }

  // -- console, watches, output ------------------------------------------------------------

  async evaluate(expression, context) {
    return this.dap.request("evaluate", { expression, frameId: this.frame?.id, context });
  }

  async evaluateConsole() {
    const input = this.$("console-input");
    const expression = input.value;
    if (!expression.trim() || !this.paused) return;
    this.history.push(expression);
    this.historyAt = this.history.length;
    input.value = "";
    this.consoleLine(`>>> ${expression}`, "input");
    try {
      const answer = await this.evaluate(expression, "repl");
      const log = this.$("console-log");
      const holder = el("ul", { class: "tree result", role: "tree",
        "aria-label": `Result of ${expression}` });
      log.append(holder);
      const tree = new Tree(holder, (ref) => this.children(ref));
      await tree.add({ name: "", value: answer.result, type: answer.type,
        ref: answer.variablesReference });
      log.scrollTop = log.scrollHeight;
    } catch (error) {
      this.consoleLine(error.message, "error");
    }
  }

  historyKey(event) {
    if (event.key !== "ArrowUp" && event.key !== "ArrowDown") return;
    event.preventDefault();
    this.historyAt += event.key === "ArrowUp" ? -1 : 1;
    this.historyAt = Math.max(0, Math.min(this.history.length, this.historyAt));
    event.target.value = this.history[this.historyAt] ?? "";
  }

  consoleLine(text, kind) {
    const log = this.$("console-log");
    log.append(el("div", { class: `line ${kind}` }, text));
    log.scrollTop = log.scrollHeight;
  }

  async renderWatches() {
    this.watchTree.clear();
    for (const [index, expression] of this.watches.entries()) {
      let item = { name: expression, value: "", ref: 0 };
      if (this.paused && this.frame) {
        try {
          const answer = await this.evaluate(expression, "watch");
          item = { name: expression, value: answer.result, type: answer.type,
            ref: answer.variablesReference };
        } catch (error) {
          item = { name: expression, value: error.message, ref: 0, error: true };
        }
      }
      const node = await this.watchTree.add(item);
      const remove = el("button", { type: "button", class: "remove",
        "aria-label": `Remove watch ${expression}` }, "×");
      remove.addEventListener("click", () => {
        this.watches.splice(index, 1);
        this.renderWatches();
      });
      node.querySelector(".label").append(remove);
    }
  }

  output(body) {
    if (body.category === "telemetry") return;
    const pre = this.$("output");
    let text = pre.textContent + (body.output || "");
    if (text.length > MAX_OUTPUT) text = text.slice(text.length - MAX_OUTPUT);
    pre.textContent = text;
    pre.scrollTop = pre.scrollHeight;
  }

  // -- post-mortem -------------------------------------------------------------------------

  showException(record) {
    const panel = this.$("exception-panel");
    panel.hidden = !(record && record.reason === "exception");
    this.$("exception-text").textContent = record?.exception || "";
    this.$("exception-traceback").textContent = "";
  }

  async loadTraceback() {
    try {
      const info = await this.dap.request("exceptionInfo", { threadId: this.threadId });
      const details = info.details || {};
      this.$("exception-text").textContent = this.record.exception || info.description
        || info.exceptionId;
      this.$("exception-traceback").textContent = details.stackTrace || "";
    } catch (_) {
      // not stopped on the exception (stepped away): the summary stays
    }
  }
}
