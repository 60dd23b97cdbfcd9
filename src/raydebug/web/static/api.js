// The hub's HTTP API, same origin. A 401 means the hub wants its client token: the page
// asks for it once (login view), the hub keeps it in an HttpOnly cookie.

export class Unauthorized extends Error {}

export class ApiError extends Error {
  constructor(message, status, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

async function answer(response) {
  let body = null;
  try {
    body = await response.json();
  } catch (_) {
    body = null;
  }
  if (response.status === 401) throw new Unauthorized(body?.error || "client token needed");
  if (!response.ok) {
    throw new ApiError(body?.error || `HTTP ${response.status}`, response.status, body);
  }
  return body;
}

export async function getJson(path) {
  return answer(await fetch(path, { cache: "no-store", credentials: "same-origin" }));
}

export async function postJson(path, value) {
  return answer(await fetch(path, {
    method: "POST", cache: "no-store", credentials: "same-origin",
    headers: { "Content-Type": "application/json" }, body: JSON.stringify(value),
  }));
}

export async function login(token) {
  return postJson("/api/login", { token });
}

// GET `path` every `ms` while started: each answer to `answered`, an error to `failed`.
// A stop while a request is on its way ends the polling there (no later tick).
export class Polling {
  constructor(path, ms, answered, failed) {
    this.path = path;
    this.ms = ms;
    this.answered = answered;
    this.failed = failed;
    this.timer = null;
    this.running = false;
  }

  start() {
    if (this.running) return;
    this.running = true;
    const tick = async () => {
      try {
        const answer = await getJson(this.path);
        if (this.running) this.answered(answer);
      } catch (error) {
        if (this.running) this.failed(error);
      }
      if (this.running) this.timer = setTimeout(tick, this.ms);
    };
    tick();
  }

  stop() {
    this.running = false;
    clearTimeout(this.timer);
    this.timer = null;
  }
}
