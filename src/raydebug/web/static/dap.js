// A DAP client over the hub's WebSocket (/dap): each text message is one DAP message.
// The hub serves it like any IDE's connection (same routing, same policy).

export class DapError extends Error {
  constructor(command, message) {
    super(message || `${command} failed`);
    this.command = command;
  }
}

export class DapSocket {
  constructor() {
    this.seq = 0;
    this.pending = new Map();
    this.listeners = new Map();
    this.closed = null;
    this.socket = null;
  }

  connect() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    this.socket = new WebSocket(`${scheme}//${location.host}/dap`);
    return new Promise((resolve, reject) => {
      this.socket.addEventListener("open", () => resolve(this), { once: true });
      this.socket.addEventListener("error", () => reject(new Error("cannot open /dap")),
        { once: true });
      this.socket.addEventListener("message", (event) => this.#receive(event.data));
      this.socket.addEventListener("close", (event) => this.#closed(event));
    });
  }

  on(event, callback) {
    if (!this.listeners.has(event)) this.listeners.set(event, []);
    this.listeners.get(event).push(callback);
  }

  #emit(name, value) {
    for (const callback of this.listeners.get(name) || []) {
      try {
        callback(value);
      } catch (error) {
        console.error(error);
      }
    }
  }

  request(command, args = {}, timeout = 30000) {
    if (this.closed) return Promise.reject(new DapError(command, this.closed));
    const seq = ++this.seq;
    this.socket.send(JSON.stringify({ seq, type: "request", command, arguments: args }));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(seq);
        reject(new DapError(command, `${command}: no answer within ${timeout / 1000} s`));
      }, timeout);
      this.pending.set(seq, { command, resolve, reject, timer });
    });
  }

  #receive(text) {
    let message;
    try {
      message = JSON.parse(text);
    } catch (_) {
      return;
    }
    if (message.type === "response") {
      const waiter = this.pending.get(message.request_seq);
      if (!waiter) return;
      this.pending.delete(message.request_seq);
      clearTimeout(waiter.timer);
      if (message.success) waiter.resolve(message.body || {});
      else waiter.reject(new DapError(message.command, message.message));
    } else if (message.type === "event") {
      this.#emit(message.event, message.body || {});
      this.#emit("*", message);
    } else if (message.type === "request") {
      // A reverse request (runInTerminal, startDebugging): the page can do neither.
      this.socket.send(JSON.stringify({
        seq: ++this.seq, type: "response", request_seq: message.seq,
        command: message.command, success: false, message: "not supported by the web page",
      }));
    }
  }

  #closed(event) {
    this.closed = event.reason || `connection closed (${event.code})`;
    for (const waiter of this.pending.values()) {
      clearTimeout(waiter.timer);
      waiter.reject(new DapError(waiter.command, this.closed));
    }
    this.pending.clear();
    this.#emit("close", { code: event.code, reason: this.closed });
  }

  close() {
    if (this.socket && this.socket.readyState <= WebSocket.OPEN) this.socket.close(1000);
  }

  // initialize, attach to `session`, configurationDone: as IDEs do. Resolves with the
  // `stopped` event's body (the hub replays it for a thread that is already paused).
  async attach(session) {
    const stopped = new Promise((resolve) => this.on("stopped", resolve));
    const initialized = new Promise((resolve) => this.on("initialized", resolve));
    await this.request("initialize", {
      clientID: "raydebug-web", clientName: "raydebug web page", adapterID: "raydebug",
      pathFormat: "path", linesStartAt1: true, columnsStartAt1: true,
      supportsVariableType: true, supportsRunInTerminalRequest: false,
    });
    // redirectOutput: pydevd tees the process's stdout and stderr to the page (output events)
    const attached = this.request("attach", { name: "raydebug web", redirectOutput: true,
      raydebug: { session } });
    await Promise.race([initialized, attached]);
    await initialized;
    await this.request("setExceptionBreakpoints", { filters: [] });
    await this.request("configurationDone");
    await attached;
    return stopped;
  }
}
