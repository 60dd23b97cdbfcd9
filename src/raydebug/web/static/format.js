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
  const argv = session.argv || [];
  return basename(argv[1] || argv[0] || "") || `pid ${session.pid}`;
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
