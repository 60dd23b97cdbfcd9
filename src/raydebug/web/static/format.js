// Small pure helpers shared by the views.

export function age(since, now = Date.now() / 1000) {
  const seconds = Math.max(0, Math.round(now - since));
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ${seconds % 60}s`;
  return `${Math.floor(seconds / 3600)}h ${Math.floor((seconds % 3600) / 60)}m`;
}

export function basename(path) {
  return (path || "").split(/[\\/]/).pop();
}

export function sessionName(session) {
  if (session.task_name) return session.task_name;
  if (session.actor_class) return session.actor_class;
  return program(session.argv || []) || `pid ${session.pid}`;
}

// What an idle process runs: a Ray worker between tasks is "ray worker (idle)", not the
// name of Ray's worker script; another program is its script's name (sys.argv[0], or the
// script after the interpreter of a command line read from outside), never an argument.
export function program(argv) {
  const first = basename(argv[0] || "");
  if (first === "default_worker.py") return "ray worker (idle)";
  const script = argv.find((word, index) => index > 0 && word.endsWith(".py"));
  return script && first.startsWith("python") ? basename(script) : first;
}

// A session's labels as `raydebug list` shows them (RANK=0, role=eval): what tells apart
// the ranks of one job, whose rows are otherwise alike.
export function labelsText(record) {
  return Object.entries(record.labels || {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([key, value]) => `${key}=${value}`).join(", ");
}

export function nodeName(record) {
  return record.node_ip || record.host || (record.node_id || "").slice(0, 8) || "";
}

// Make an element: el("td", {class: "x"}, "text", child...)
export function el(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") element.className = value;
    else if (name === "text") element.textContent = value;
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

// pydevd answers a string evaluate with its repr; the page asks for base64 (no escapes).
export function decodeBase64Repr(result) {
  const text = result.replace(/^['"]|['"]$/g, "");
  const bytes = Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  return new TextDecoder().decode(bytes);
}

// A session whose thread a pause found blocked in C (its record's blocked_in_c), in the
// terminal's words (raydebug.session.BLOCKED_IN_C); it stays so until its call returns.
export const BLOCKED_IN_C = "blocked in C: its frames, locals and evaluate work now; it steps "
  + "once the call returns, and stops at its next line (evaluate what unblocks it, or continue)";
