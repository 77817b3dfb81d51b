// The demo's link to the server: Stream's REST API with a user token, the
// demo-only token endpoint, and the WebSocket with health checks and
// reconnection.

const HEALTH_CHECK_MS = 25_000;
const MAX_RECONNECT_DELAY_MS = 5_000;

export class APIError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status; // 0 when the server could not be reached
  }
}

/** A JSON request; any answer but 2xx becomes an APIError with the server's message. */
async function request(url, { method, headers, body }) {
  let response;
  try {
    response = await fetch(url, {
      method,
      headers: { ...headers, "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new APIError(0, "the server cannot be reached");
  }
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) throw new APIError(response.status, answer.message ?? response.statusText);
  return answer;
}

/** The Stream-style REST API with a user token. */
export class API {
  constructor(session) {
    this.session = session;
    this.onUnauthorized = () => {};
  }

  async call(method, path, body) {
    const url = `${path}${path.includes("?") ? "&" : "?"}api_key=${encodeURIComponent(this.session.apiKey)}`;
    try {
      return await request(url, { method, body, headers: { Authorization: this.session.token, "stream-auth-type": "jwt" } });
    } catch (error) {
      if (error.status === 401) this.onUnauthorized(error.message);
      throw error;
    }
  }
}

/** Asks the demo-only endpoint for a user token (exists only with `ticks serve --demo`). */
export async function requestDemoToken(userID) {
  const answer = await request("/demo/token", { method: "POST", body: { user_id: userID } });
  return { apiKey: answer.api_key, userID: answer.user_id, token: answer.token };
}

/**
 * The user's WebSocket: Stream's `/connect`, a health check every 25 s, and
 * reconnection with a growing delay. `onConnected` runs after every
 * (re)connection, once the server's first frame has arrived.
 */
export class EventSocket {
  constructor(session, { onConnected, onDisconnected, onEvent, onRefused }) {
    this.session = session;
    this.handlers = { onConnected, onDisconnected, onEvent, onRefused };
    this.attempt = 0;
    this.stopped = false;
  }

  start() {
    this.stopped = false;
    this.open();
  }

  open() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const json = JSON.stringify({
      user_id: this.session.userID,
      user_details: { id: this.session.userID },
      server_determines_connection_id: true,
    });
    const query = new URLSearchParams({ api_key: this.session.apiKey, authorization: this.session.token, json });
    const socket = new WebSocket(`${scheme}://${location.host}/connect?${query}`);
    this.socket = socket;
    this.refusal = null;
    let connected = false;
    socket.onmessage = (message) => {
      let event;
      try {
        event = JSON.parse(message.data);
      } catch {
        return;
      }
      if (event.error) {
        this.refusal = event.error;
      } else if (event.type === "health.check") {
        if (!connected) {
          connected = true;
          this.attempt = 0;
          this.handlers.onConnected();
        }
      } else {
        this.handlers.onEvent(event);
      }
    };
    socket.onopen = () => {
      this.healthCheck = setInterval(() => {
        if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify([{ type: "health.check" }]));
      }, HEALTH_CHECK_MS);
    };
    socket.onclose = () => {
      clearInterval(this.healthCheck);
      if (this.stopped || socket !== this.socket) return;
      if (this.refusal) {
        // A refused token does not get better by retrying.
        this.handlers.onRefused(this.refusal);
        return;
      }
      const delay = Math.min(MAX_RECONNECT_DELAY_MS, 500 * 2 ** this.attempt) * (0.8 + Math.random() * 0.4);
      this.attempt += 1;
      this.handlers.onDisconnected(delay);
      this.reconnect = setTimeout(() => this.open(), delay);
    };
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.reconnect);
    clearInterval(this.healthCheck);
    this.socket?.close();
  }
}
