// The page: a router over three views (sessions and snapshots, a session's or a snapshot's
// debugger, processes) and the client-token login. Hash routes (#/, #/session/ID,
// #/snapshot/ID, #/processes) need nothing of the hub.

import { ApiError, Unauthorized, getJson, login } from "./api.js";
import { Debugger } from "./debugger.js";
import { Processes } from "./processes.js";
import { SessionList } from "./sessions.js";
import { SnapshotList } from "./snapshots.js";

class App {
  constructor() {
    this.sessions = new SessionList(this);
    this.snapshots = new SnapshotList(this);
    this.debugger = new Debugger(this);
    this.processes = new Processes(this);
    this.needsLogin = false;
    window.addEventListener("hashchange", () => this.route());
    document.getElementById("login-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.signIn();
    });
  }

  show(view) {
    for (const section of document.querySelectorAll(".view")) {
      section.hidden = section.id !== `${view}-view`;
    }
    for (const link of document.querySelectorAll("nav a")) {
      if (link.dataset.view === view || (view === "debugger" && link.dataset.view === "sessions")) {
        link.setAttribute("aria-current", "page");
      } else {
        link.removeAttribute("aria-current");
      }
    }
  }

  async route() {
    if (this.needsLogin) {
      this.show("login");
      document.getElementById("login-token").focus();
      return;
    }
    const hash = location.hash || "#/";
    const snapshot = hash.match(/^#\/snapshot\/(.+)$/);
    if (snapshot) {
      // A snapshot: read-only in the debugger view (the hub serves it by its id).
      const id = decodeURIComponent(snapshot[1]);
      this.show("debugger");
      this.processes.stop();
      this.snapshots.stop();
      let record = null;
      try {
        record = await this.snapshots.record(id);
      } catch (error) {
        this.failed(error);
      }
      await this.debugger.open(id, record || { id, snapshot: true });
      return;
    }
    const session = hash.match(/^#\/session\/(.+)$/);
    if (session) {
      const id = decodeURIComponent(session[1]);
      this.show("debugger");
      this.sessions.start(); // keeps the record fresh; the list is one click away
      let record = this.sessions.byId(id);
      if (!record) {
        try {
          record = (await getJson("/api/sessions")).find((s) => s.id === id);
        } catch (error) {
          this.failed(error);
        }
      }
      this.processes.stop();
      this.snapshots.stop();
      await this.debugger.open(id, record);
      return;
    }
    this.debugger.close();
    if (hash.startsWith("#/processes")) {
      this.show("processes");
      this.snapshots.stop();
      this.processes.start();
    } else {
      this.processes.stop();
      this.show("sessions");
      this.sessions.start();
      this.snapshots.start();
    }
  }

  hubStatus(text) {
    document.getElementById("hub-status").textContent = text;
  }

  failed(error) {
    if (error instanceof Unauthorized) {
      if (!this.needsLogin) {
        this.needsLogin = true;
        this.sessions.stop();
        this.snapshots.stop();
        this.processes.stop();
        this.route();
      }
      return;
    }
    this.hubStatus(error instanceof ApiError ? error.message : "hub unreachable");
  }

  async signIn() {
    const input = document.getElementById("login-token");
    const message = document.getElementById("login-error");
    try {
      await login(input.value);
      input.value = "";
      message.textContent = "";
      this.needsLogin = false;
      this.route();
    } catch (error) {
      message.textContent = error instanceof Unauthorized || error.status === 401
        ? "That is not this hub's client token." : error.message;
    }
  }
}

new App().route();
