// The session list: one row per paused thread, polled from /api/sessions so that new
// pauses appear and finished ones leave without a reload.

import { Polling } from "./api.js";
import { BLOCKED_IN_C, age, basename, el, labelsText, nodeName, sessionName } from "./format.js";

const POLL_MS = 1000;

export class SessionList {
  constructor(app) {
    this.app = app;
    this.sessions = [];
    this.body = document.querySelector("#sessions-table tbody");
    this.shown = "";
    this.polling = new Polling("/api/sessions", POLL_MS, (sessions) => {
      this.sessions = sessions;
      this.app.hubStatus("");
      this.render();
      this.app.debugger.offerNext();
    }, (error) => this.app.failed(error));
  }

  start() {
    this.polling.start();
  }

  stop() {
    this.polling.stop();
  }

  byId(id) {
    return this.sessions.find((session) => session.id === id);
  }

  render() {
    const sessions = [...this.sessions].sort((a, b) => a.since - b.since);
    document.getElementById("sessions-count").textContent = `(${sessions.length})`;
    document.getElementById("sessions-empty").hidden = sessions.length > 0;
    // Rebuilt only when something but the ages changed (keeps focus and selection).
    const key = JSON.stringify(sessions.map((s) => [s.id, s.state, s.line, s.file]));
    if (key === this.shown) {
      for (const row of this.body.rows) {
        const session = this.byId(row.dataset.session);
        if (session) row.querySelector(".age").textContent = age(session.since);
      }
      return;
    }
    this.shown = key;
    this.body.replaceChildren(...sessions.map((session) => this.row(session)));
  }

  row(session) {
    const name = sessionName(session);
    const labels = labelsText(session);
    const link = el("a", { href: `#/session/${encodeURIComponent(session.id)}` }, name);
    const row = el("tr", { "data-session": session.id, class: `state-${session.state}` },
      el("th", { scope: "row" }, link,
        session.actor_class && session.task_name ? el("span", { class: "sub" },
          ` ${session.actor_class}`) : null,
        labels ? el("span", { class: "sub labels" }, ` ${labels}`) : null),
      el("td", { "data-label": "node" }, nodeName(session)),
      el("td", { class: "num", "data-label": "pid" }, session.pid),
      el("td", { class: "where" }, `${basename(session.file)}:${session.line}`,
        el("span", { class: "sub" }, ` in ${session.function}`)),
      el("td", {}, el("span", { class: `badge reason-${session.reason}` }, session.reason),
        session.blocked_in_c ? el("span", { class: "badge blocked", title: BLOCKED_IN_C },
          "blocked in C") : null,
        session.state === "attached" ? el("span", { class: "badge attached" }, "attached")
          : null),
      el("td", { class: "exception-cell" }, session.exception || ""),
      el("td", { class: "age num", "data-label": "paused for" }, age(session.since)));
    row.addEventListener("click", (event) => {
      if (event.target.tagName !== "A") location.hash = link.getAttribute("href");
    });
    return row;
  }
}
