// The snapshot list, under the paused sessions: one row per snapshot the hub keeps (a
// failure's or a snapshot point's frames and locals, captured without pausing), the
// exception first, newest first. Polled from /api/snapshots while the sessions view is
// shown; a row opens the snapshot in the debugger view, read-only (#/snapshot/ID).

import { Polling, getJson } from "./api.js";
import { age, basename, el, nodeName, sessionName } from "./format.js";

const POLL_MS = 2000;

export class SnapshotList {
  constructor(app) {
    this.app = app;
    this.snapshots = [];
    this.body = document.querySelector("#snapshots-table tbody");
    this.shown = "";
    this.polling = new Polling("/api/snapshots", POLL_MS, (answer) => {
      this.snapshots = answer.snapshots || [];
      this.render();
    }, (error) => this.app.failed(error));
  }

  start() {
    this.polling.start();
  }

  stop() {
    this.polling.stop();
  }

  // The listing's row of snapshot `id`, marked a snapshot (the debugger reads it so).
  async record(id) {
    let row = this.snapshots.find((snapshot) => snapshot.id === id);
    if (!row) {
      row = ((await getJson("/api/snapshots")).snapshots || []).find((s) => s.id === id);
    }
    return row ? { ...row, snapshot: true } : null;
  }

  render() {
    const snapshots = this.snapshots; // newest first, as the hub lists them
    document.getElementById("snapshots-count").textContent = `(${snapshots.length})`;
    document.getElementById("snapshots-section").hidden = snapshots.length === 0;
    const key = JSON.stringify(snapshots.map((s) => s.id));
    if (key === this.shown) {
      for (const row of this.body.rows) {
        const snapshot = snapshots.find((s) => s.id === row.dataset.snapshot);
        if (snapshot) row.querySelector(".age").textContent = age(snapshot.time);
      }
      return;
    }
    this.shown = key;
    this.body.replaceChildren(...snapshots.map((snapshot) => this.row(snapshot)));
  }

  row(snapshot) {
    const href = `#/snapshot/${encodeURIComponent(snapshot.id)}`;
    const what = snapshot.exception || "snapshot point";
    const link = el("a", { href }, what);
    const row = el("tr", { "data-snapshot": snapshot.id },
      el("th", { scope: "row", class: "exception-cell" }, link),
      el("td", { "data-label": "task" }, sessionName(snapshot)),
      el("td", { "data-label": "node" }, nodeName(snapshot)),
      el("td", { class: "num", "data-label": "pid" }, snapshot.pid),
      el("td", { class: "where" }, `${basename(snapshot.file)}:${snapshot.line}`,
        el("span", { class: "sub" }, ` in ${snapshot.function}`)),
      el("td", { class: "age num", "data-label": "taken" }, age(snapshot.time)));
    row.addEventListener("click", (event) => {
      if (event.target.tagName !== "A") location.hash = href;
    });
    return row;
  }
}
