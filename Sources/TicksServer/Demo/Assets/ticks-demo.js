// Ticks web demo: a small chat client on Ticks' Stream-compatible API that
// shows each own message's read indicator live. Plain JavaScript modules, no
// build step. It behaves like the Swift SDK (docs/sdk.md): cursors are message
// ids compared by position in the loaded log, messages are marked delivered
// when they arrive and read when the list is visible and at the bottom, and
// state is reloaded after every (re)connection. A channel opens on its newest
// page of messages; older pages are loaded at the top of the list, each with
// the members' current cursors, so older messages show their receipts too.

import { ChannelModel, arrivalsSoFar } from "./channel-model.js";
import { API, EventSocket, requestDemoToken } from "./connection.js";
import {
  avatar,
  displayName,
  element,
  historyElement,
  keepScroll,
  messageElement,
  receiptTimeElement,
  reconcile,
  scrollAnchor,
} from "./views.js";

const $ = (id) => document.getElementById(id);

/** `bytes` random bytes as hex, for ids the client makes. */
const randomHex = (bytes) =>
  [...crypto.getRandomValues(new Uint8Array(bytes))].map((byte) => byte.toString(16).padStart(2, "0")).join("");

/** Whether a scrolled list shows its end (a little slack for rounding). */
const isAtBottom = (list) => list.scrollHeight - list.scrollTop - list.clientHeight <= 24;

/** Whether a scrolled list shows its beginning, where older messages are loaded. */
const isAtTop = (list) => list.scrollTop <= 24;

/** What the demo's fake voice notes point at: it is never fetched. */
const VOICE_NOTE_URL = "https://example.invalid/ticks-demo/voice-note.m4a";
const SESSION_KEY = "ticks-demo-session"; // sessionStorage: each tab may be another user
const RECENT_KEY = "ticks-demo-recent-users"; // localStorage: shared by the windows of a browser
const CHANNEL_PAGE = 30;
const MESSAGE_PAGE = 100;
const MAX_DELIVERED_PER_CALL = 100;

/** The user as the server stores it, or undefined. */
async function storedUser(api, userID) {
  const payload = encodeURIComponent(JSON.stringify({ filter_conditions: { id: { $in: [userID] } } }));
  return (await api.call("GET", `/users?payload=${payload}`)).users[0];
}

class DemoApp {
  constructor() {
    this.session = null;
    this.api = null;
    this.socket = null;
    this.channels = new Map(); // cid → ChannelModel
    this.openCID = null;
    this.outbox = new Map(); // message id → {cid, message, status: "pending" | "failed", error}
    this.deliveries = new Map(); // cid → newest message id to mark delivered
    this.reading = { inFlight: false, again: false };
    this.receiptsMessageID = null;
  }

  get me() {
    return this.session?.userID;
  }
  get openChannel() {
    return this.openCID ? this.channels.get(this.openCID) : null;
  }

  // MARK: Signing in and out

  boot() {
    this.bindControls();
    const saved = sessionStorage.getItem(SESSION_KEY);
    if (saved) {
      this.begin(JSON.parse(saved));
    } else {
      this.showSignIn();
    }
  }

  showSignIn(message = "") {
    $("app").hidden = true;
    $("sign-in").hidden = false;
    $("sign-in-error").textContent = message;
    const recent = JSON.parse(localStorage.getItem(RECENT_KEY) ?? "[]");
    $("recent").hidden = recent.length === 0;
    $("recent-users").replaceChildren(
      ...recent.map((user) =>
        element("li", {}, element("button", { type: "button", "data-user-id": user.id }, displayName(user))),
      ),
    );
    $("sign-in-id").focus();
  }

  async signIn(userID, name) {
    $("sign-in-error").textContent = "";
    try {
      const session = await requestDemoToken(userID);
      const api = new API(session);
      // Upsert our own user, keeping what is already stored.
      const existing = await storedUser(api, userID);
      if (!existing || (name && existing.name !== name)) {
        const user = { ...(existing ?? {}), id: userID, ...(name ? { name } : {}) };
        await api.call("POST", "/users", { users: { [userID]: user } });
      }
      session.name = name || existing?.name || userID;
      session.sharesReads = existing?.privacy_settings?.read_receipts?.enabled !== false;
      const recent = JSON.parse(localStorage.getItem(RECENT_KEY) ?? "[]").filter((user) => user.id !== userID);
      localStorage.setItem(RECENT_KEY, JSON.stringify([{ id: userID, name: session.name }, ...recent].slice(0, 8)));
      sessionStorage.setItem(SESSION_KEY, JSON.stringify(session));
      this.begin(session);
    } catch (error) {
      $("sign-in-error").textContent =
        error.status === 404 ? "This server is not in demo mode: start it with `ticks serve --demo`." : error.message;
    }
  }

  begin(session) {
    this.session = session;
    this.api = new API(session);
    this.api.onUnauthorized = (message) => this.signOut(`Signed out: ${message ?? "the token is not valid"}`);
    this.outbox = new Map(
      JSON.parse(sessionStorage.getItem(this.outboxKey) ?? "[]").map((entry) => [
        entry.message.id,
        { ...entry, status: "pending" },
      ]),
    );
    $("sign-in").hidden = true;
    $("app").hidden = false;
    $("me").textContent = session.name ?? session.userID;
    $("share-reads").checked = session.sharesReads !== false;
    this.setConnection("connecting", "Connecting…");
    this.socket = new EventSocket(session, {
      onConnected: () => this.connected(),
      onDisconnected: (delay) =>
        this.setConnection("reconnecting", `Offline: reconnecting in ${Math.ceil(delay / 1000)} s`),
      onEvent: (event) => this.handle(event),
      onRefused: (error) => this.signOut(`Signed out: ${error.message}`),
    });
    this.socket.start();
    this.renderAll();
  }

  signOut(message = "") {
    this.socket?.stop();
    this.socket = null;
    this.session = null;
    this.channels.clear();
    this.openCID = null;
    clearTimeout(this.deliveryTimer);
    this.deliveries.clear();
    $("app").dataset.view = "list";
    sessionStorage.removeItem(SESSION_KEY);
    if ($("receipts").open) $("receipts").close();
    this.showSignIn(message);
  }

  /**
   * Tells the person about a failed call. Being offline needs no notice: the
   * connection badge says so, and everything is retried after reconnecting.
   */
  notify(what, error) {
    console.warn(what, error);
    if (error.status === 0) return;
    const notice = $("notice");
    notice.textContent = `${what}: ${error.message}`;
    notice.hidden = false;
    clearTimeout(this.noticeTimer);
    this.noticeTimer = setTimeout(() => {
      notice.hidden = true;
    }, 6000);
  }

  /** R10: with read receipts off, others never see this user's reads; their own unread counts still work. */
  async shareReadReceipts(shared) {
    try {
      const existing = (await storedUser(this.api, this.me)) ?? { id: this.me };
      const privacy = { ...(existing.privacy_settings ?? {}), read_receipts: { enabled: shared } };
      await this.api.call("POST", "/users", { users: { [this.me]: { ...existing, privacy_settings: privacy } } });
      this.session.sharesReads = shared;
      sessionStorage.setItem(SESSION_KEY, JSON.stringify(this.session));
    } catch (error) {
      $("share-reads").checked = !shared;
      this.notify("Could not change read receipts", error);
    }
  }

  setConnection(state, text) {
    $("connection").dataset.state = state;
    $("connection").textContent = text;
  }

  /** After every (re)connection: reload what may have changed meanwhile, then resend what waits. */
  async connected() {
    this.setConnection("connected", "Online");
    try {
      await Promise.all([this.loadChannels(), this.loadChannelTypes()]);
    } catch (error) {
      this.setConnection("reconnecting", `Could not load channels: ${error.message}`);
      return;
    }
    for (const entry of this.outbox.values()) if (entry.status === "pending") this.post(entry);
  }

  // MARK: Loading

  async loadChannels() {
    const asked = arrivalsSoFar();
    const answer = await this.api.call("POST", "/channels", {
      filter_conditions: { members: { $in: [this.me] } },
      sort: [{ field: "last_message_at", direction: -1 }],
      limit: CHANNEL_PAGE,
      message_limit: MESSAGE_PAGE,
      state: true,
      watch: true,
    });
    const loaded = new Map();
    for (const state of answer.channels) {
      const model = this.channels.get(state.channel.cid) ?? new ChannelModel(state, MESSAGE_PAGE);
      model.load(state, MESSAGE_PAGE, asked);
      loaded.set(model.cid, model);
    }
    this.channels = loaded;
    if (this.openCID && !loaded.has(this.openCID)) this.openCID = null;
    for (const channel of loaded.values()) this.deliverNewest(channel);
    this.renderAll();
  }

  async reloadChannel(cid) {
    const channel = this.channels.get(cid);
    if (!channel) return this.loadChannels();
    const { type, id } = channel.channel;
    const asked = arrivalsSoFar();
    const state = await this.api.call("POST", `/channels/${type}/${encodeURIComponent(id)}/query`, {
      state: true,
      watch: true,
      messages: { limit: MESSAGE_PAGE },
    });
    channel.load(state, MESSAGE_PAGE, asked);
    this.deliverNewest(channel);
    this.renderAll();
  }

  /**
   * Loads the page of messages before the oldest loaded one. The answer holds
   * the page oldest first (fewer than asked when it reaches the first
   * message) and every member's current read state, taken in too: a cursor
   * may point into the page, or have moved since the channel was loaded.
   */
  async loadOlder(channel = this.openChannel) {
    const oldest = channel?.messages[0];
    if (!oldest || channel.beginningLoaded || channel.loadingOlder) return;
    const generation = channel.generation;
    channel.loadingOlder = true;
    this.renderAll();
    try {
      const { type, id } = channel.channel;
      const answer = await this.api.call("POST", `/channels/${type}/${encodeURIComponent(id)}/query`, {
        state: true,
        messages: { limit: MESSAGE_PAGE, id_lt: oldest.id },
      });
      // A reload meanwhile replaced the log this page was asked for (it starts again from the newest page).
      if (channel.generation !== generation || this.channels.get(channel.cid) !== channel) return;
      const messages = answer.messages ?? [];
      channel.addOlder(messages, answer.read ?? [], { complete: messages.length < MESSAGE_PAGE, me: this.me });
    } catch (error) {
      this.notify("Could not load older messages", error);
    } finally {
      if (channel.generation === generation) channel.loadingOlder = false;
      this.renderAll();
    }
  }

  async loadChannelTypes() {
    const { channel_types: types } = await this.api.call("GET", "/channeltypes");
    const describe = (config) =>
      config.read_events === false
        ? `${config.name} (no read receipts)`
        : config.delivery_events === false
          ? `${config.name} (no delivered receipts)`
          : config.name;
    const configs = Object.values(types).sort((a, b) =>
      a.name === "messaging" ? -1 : b.name === "messaging" ? 1 : a.name.localeCompare(b.name),
    );
    const select = $("new-channel-type");
    const chosen = select.value;
    select.replaceChildren(...configs.map((config) => element("option", { value: config.name }, describe(config))));
    if (chosen) select.value = chosen;
  }

  // MARK: Events

  handle(event) {
    const channel = this.channels.get(event.cid);
    if (!channel) {
      // A channel this user was just added to, or first hears of: one reload for a burst of events.
      if (event.cid) {
        clearTimeout(this.channelsTimer);
        this.channelsTimer = setTimeout(
          () => this.loadChannels().catch((error) => this.notify("Could not load channels", error)),
          100,
        );
      }
      return;
    }
    const own = channel.reads.get(this.me);
    let reload = false;
    switch (event.type) {
      case "message.new": {
        if (event.message.parent_id && !event.message.show_in_channel) {
          // A reply shown only in its thread: the channel shows its parent's reply count.
          const parent = channel.messages.find((message) => message.id === event.message.parent_id);
          if (parent) channel.replace({ ...parent, reply_count: (parent.reply_count ?? 0) + 1 });
          break;
        }
        channel.add(event.message, this.me);
        if (this.outbox.delete(event.message.id)) this.saveOutbox();
        if (event.message.user.id !== this.me) {
          if (own && event.unread_count != null) own.unread_messages = event.unread_count;
          this.deliver(channel, event.message);
        }
        break;
      }
      case "message.read":
        // A thread marked read moves the thread's read state, not the channel's cursors.
        if (event.thread) break;
        reload = channel.moveCursor(event.user, "read", event.last_read_message_id, event.created_at) === "reload";
        break;
      case "message.read_by_all":
        // To the author alone (R13): every other member has read their messages up to it.
        if (channel.isFurther(event.message_id, channel.readByAllUpTo)) channel.readByAllUpTo = event.message_id;
        break;
      case "message.delivered_to_all":
        if (channel.isFurther(event.message_id, channel.deliveredToAllUpTo)) channel.deliveredToAllUpTo = event.message_id;
        break;
      case "message.played": {
        // A member first played a voice note or video (R14), as this user may see it.
        const players = channel.played.get(event.message_id) ?? new Set();
        players.add(event.user.id);
        channel.played.set(event.message_id, players);
        break;
      }
      case "message.updated":
      case "message.deleted":
        // Edited or deleted, a message keeps its place and its receipts.
        channel.replace(event.message);
        break;
      case "channel.updated":
        if (event.channel) channel.channel = { ...channel.channel, ...event.channel };
        break;
      case "channel.truncated":
      case "member.updated":
        reload = true;
        break;
      case "channel.deleted":
        this.channels.delete(channel.cid);
        if (this.openCID === channel.cid) this.openCID = null;
        break;
      case "message.delivered":
        reload =
          channel.moveCursor(
            event.user,
            "delivered",
            event.last_delivered_message_id,
            event.last_delivered_at ?? event.created_at,
          ) === "reload";
        break;
      case "notification.mark_read":
        if (own) own.unread_messages = event.unread_count ?? 0;
        break;
      case "notification.mark_unread":
      case "member.added":
        reload = true;
        break;
      case "member.removed":
        if (event.member?.user_id === this.me || event.user?.id === this.me) {
          this.channels.delete(channel.cid);
          if (this.openCID === channel.cid) this.openCID = null;
        } else {
          reload = true;
        }
        break;
    }
    if (reload) {
      this.reloadChannel(channel.cid).catch((error) => this.notify("Could not reload the channel", error));
    } else {
      this.renderAll();
    }
    if (this.receiptsMessageID && channel.has(this.receiptsMessageID)) this.refreshReceipts();
  }

  // MARK: Delivered and read

  /** Marks the newest message from someone else delivered, if this user's devices have not. */
  deliverNewest(channel) {
    const newestFromOthers = channel.messages.findLast((message) => message.user.id !== this.me);
    if (newestFromOthers) this.deliver(channel, newestFromOthers);
  }

  deliver(channel, message) {
    if (channel.config.delivery_events === false) return; // R9: the server would ignore it
    if (channel.cursors(this.me).delivered >= (channel.position(message.id) ?? Infinity)) return;
    this.deliveries.set(channel.cid, message.id);
    clearTimeout(this.deliveryTimer);
    this.deliveryTimer = setTimeout(() => this.flushDeliveries(), 100);
  }

  async flushDeliveries() {
    const batch = [...this.deliveries].slice(0, MAX_DELIVERED_PER_CALL);
    for (const [cid] of batch) this.deliveries.delete(cid);
    // Reading them meanwhile (R1) made the call needless.
    const needed = batch.filter(([cid, id]) => {
      const channel = this.channels.get(cid);
      return channel && channel.cursors(this.me).delivered < (channel.position(id) ?? Infinity);
    });
    if (needed.length > 0) {
      try {
        await this.api.call("POST", "/channels/delivered", {
          latest_delivered_messages: needed.map(([cid, id]) => ({ cid, id })),
        });
      } catch (error) {
        // Offline: the reload after reconnecting marks them again.
        this.notify("Could not mark messages delivered", error);
      }
    }
    if (this.deliveries.size > 0) this.flushDeliveries();
  }

  /** Marks the open channel read when its newest messages can be seen. */
  async markReadIfSeen() {
    const channel = this.openChannel;
    const list = $("messages");
    if (!channel || !channel.newest || document.visibilityState !== "visible") return;
    if (list.getClientRects().length === 0 || !isAtBottom(list)) return;
    const caughtUp = channel.cursors(this.me).read >= channel.messages.length && channel.unreadCount(this.me) === 0;
    if (caughtUp) return;
    if (this.reading.inFlight) {
      this.reading.again = true;
      return;
    }
    this.reading.inFlight = true;
    try {
      const { type, id } = channel.channel;
      const newest = channel.newest;
      const { event } = await this.api.call("POST", `/channels/${type}/${encodeURIComponent(id)}/read`, {
        message_id: newest.id,
      });
      const own = channel.reads.get(this.me);
      if (own) own.unread_messages = 0;
      channel.moveCursor(event?.user ?? { id: this.me }, "read", event?.last_read_message_id ?? newest.id, event?.created_at);
      this.renderAll();
    } catch (error) {
      // Offline: tried again after reconnecting.
      this.notify("Could not mark the channel read", error);
    } finally {
      this.reading.inFlight = false;
      if (this.reading.again) {
        this.reading.again = false;
        this.markReadIfSeen();
      }
    }
  }

  // MARK: Sending

  get outboxKey() {
    return `ticks-demo-outbox:${this.me}`;
  }

  saveOutbox() {
    const entries = [...this.outbox.values()].map(({ cid, message }) => ({ cid, message }));
    sessionStorage.setItem(this.outboxKey, JSON.stringify(entries));
  }

  send(text, attachments = []) {
    const channel = this.openChannel;
    if (!channel) return;
    const id = `${this.me}-${randomHex(8)}`;
    const message = {
      id, text, attachments, user: { id: this.me, name: this.session.name }, created_at: new Date().toISOString(),
    };
    const entry = { cid: channel.cid, message, status: "pending" };
    this.outbox.set(id, entry);
    this.saveOutbox();
    this.renderAll({ scrollToBottom: true });
    this.post(entry);
  }

  /** Sends (or resends) an outbox message; the server keeps one copy per id (R11). */
  async post(entry) {
    const [type, ...rest] = entry.cid.split(":");
    entry.status = "pending";
    this.renderAll();
    try {
      const { message } = await this.api.call("POST", `/channels/${type}/${encodeURIComponent(rest.join(":"))}/message`, {
        message: { id: entry.message.id, text: entry.message.text, attachments: entry.message.attachments ?? [] },
      });
      this.outbox.delete(message.id);
      this.channels.get(entry.cid)?.add(message, this.me);
    } catch (error) {
      if (!this.outbox.has(entry.message.id)) return;
      entry.status = "failed";
      entry.error = error.message;
    }
    this.saveOutbox();
    this.renderAll();
  }

  /** The user pressed play on a voice note or video: the server keeps the first play (R14). */
  async play(messageID) {
    const channel = this.openChannel;
    if (!channel) return;
    try {
      await this.api.call("POST", `/messages/${encodeURIComponent(messageID)}/played`, {});
      const players = channel.played.get(messageID) ?? new Set();
      players.add(this.me);
      channel.played.set(messageID, players);
      this.renderAll();
    } catch (error) {
      this.notify("Could not mark it played", error);
    }
  }

  // MARK: Creating and opening channels

  async createChannel(form) {
    $("new-channel-error").textContent = "";
    const name = form.name.value.trim();
    const others = form.members.value.split(/[\s,]+/).filter((id) => id && id !== this.me);
    const slug = name.toLowerCase().replace(/[^a-z0-9_-]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 40) || "chat";
    const id = `${slug}-${randomHex(3)}`;
    try {
      const state = await this.api.call("POST", `/channels/${form.type.value}/${id}/query`, {
        data: { name, members: [this.me, ...others] },
        state: true,
        watch: true,
        messages: { limit: MESSAGE_PAGE },
      });
      const channel = new ChannelModel(state, MESSAGE_PAGE);
      this.channels.set(channel.cid, channel);
      form.reset();
      $("new-channel").open = false;
      this.open(channel.cid);
    } catch (error) {
      $("new-channel-error").textContent = error.message;
    }
  }

  open(cid) {
    this.openCID = cid;
    $("app").dataset.view = "conversation";
    $("messages").replaceChildren();
    this.renderAll({ scrollToBottom: true });
    $("composer-text").focus();
    this.markReadIfSeen();
  }

  // MARK: Rendering

  renderAll({ scrollToBottom = false } = {}) {
    if (!this.session) return;
    this.renderChannelList();
    this.renderConversation(scrollToBottom);
    const total = [...this.channels.values()].reduce((sum, channel) => sum + channel.unreadCount(this.me), 0);
    document.title = total > 0 ? `(${total}) Ticks demo` : "Ticks demo";
  }

  renderChannelList() {
    const lastActivity = (channel) => Date.parse(channel.newest?.created_at ?? channel.channel.created_at);
    const channels = [...this.channels.values()].sort((a, b) => lastActivity(b) - lastActivity(a));
    $("no-channels").hidden = channels.length > 0;
    reconcile(
      $("channel-list"),
      channels.map((channel) => {
        const unread = channel.unreadCount(this.me);
        const newest = channel.newest;
        const preview = newest
          ? `${newest.user.id === this.me ? "You" : displayName(newest.user)}: ${newest.text ?? ""}`
          : "No messages yet";
        return element(
          "li",
          { "data-key": channel.cid },
          element(
            "button",
            { type: "button", "data-cid": channel.cid, "aria-current": channel.cid === this.openCID ? "true" : null },
            element("span", { className: "name" }, channel.name),
            unread > 0 ? element("span", { className: "unread", "aria-label": `${unread} unread` }, String(unread)) : null,
            element("span", { className: "preview" }, preview),
          ),
        );
      }),
    );
  }

  renderConversation(scrollToBottom) {
    const channel = this.openChannel;
    $("composer").hidden = !channel;
    $("conversation").dataset.cid = channel?.cid ?? "";
    if (!channel) {
      $("channel-title").textContent = "Pick a channel";
      $("channel-info").textContent = "";
      $("messages").replaceChildren();
      return;
    }
    $("channel-title").textContent = channel.name;
    const config = channel.config;
    const receipts =
      config.read_events === false ? "read receipts off" : config.delivery_events === false ? "no delivered receipts" : "";
    $("channel-info").textContent = [`${channel.memberCount} members`, channel.channel.type, receipts]
      .filter(Boolean)
      .join(" · ");

    const list = $("messages");
    const wasAtBottom = isAtBottom(list);
    // Scrolled up, the message in view stays in place while older ones are added above it.
    const anchor = wasAtBottom ? null : scrollAnchor(list);
    const waiting = [...this.outbox.values()].filter((entry) => entry.cid === channel.cid && !channel.has(entry.message.id));
    reconcile(
      list,
      [
        historyElement(channel),
        ...channel.messages.map((message) => messageElement(channel, message, this.me, null)),
        ...waiting.map((entry) => messageElement(channel, entry.message, this.me, entry)),
      ].filter(Boolean),
    );
    if (scrollToBottom || wasAtBottom) {
      list.scrollTop = list.scrollHeight;
    } else {
      keepScroll(list, anchor);
    }
    this.markReadIfSeen();
  }

  // MARK: The receipts sheet

  async showReceipts(messageID) {
    const channel = this.openChannel;
    const message = channel?.messages.find((candidate) => candidate.id === messageID);
    if (!message) return;
    this.receiptsMessageID = messageID;
    $("receipts-message").textContent = message.text ?? "";
    $("delivered-section").hidden = channel.config.delivery_events === false;
    $("read-by").replaceChildren();
    $("delivered-to").replaceChildren();
    $("receipts-error").textContent = "";
    $("receipts").showModal();
    await this.refreshReceipts();
  }

  async refreshReceipts() {
    const messageID = this.receiptsMessageID;
    if (!messageID) return;
    let answer;
    try {
      answer = await this.api.call("GET", `/messages/${encodeURIComponent(messageID)}/receipts`);
    } catch (error) {
      $("receipts-error").textContent = error.message;
      return;
    }
    if (messageID !== this.receiptsMessageID) return;
    const person = (receipt, at, exact) =>
      element(
        "li",
        { "data-user-id": receipt.user.id },
        avatar(receipt.user),
        element("span", { className: "who" }, displayName(receipt.user)),
        receiptTimeElement(at, exact),
      );
    const nobody = (text) => element("li", { className: "nobody" }, text);
    const read = answer.receipts.filter((receipt) => receipt.read_at).sort((a, b) => Date.parse(b.read_at) - Date.parse(a.read_at));
    const delivered = answer.receipts
      .filter((receipt) => !receipt.read_at && receipt.delivered_at)
      .sort((a, b) => Date.parse(b.delivered_at) - Date.parse(a.delivered_at));
    $("read-by").replaceChildren(...(read.length ? read.map((receipt) => person(receipt, receipt.read_at, receipt.read_at_exact)) : [nobody("Nobody yet")]));
    $("delivered-to").replaceChildren(
      ...(delivered.length ? delivered.map((receipt) => person(receipt, receipt.delivered_at, receipt.delivered_at_exact)) : [nobody("Nobody else")]),
    );
  }

  // MARK: Controls

  bindControls() {
    $("sign-in-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const form = event.currentTarget;
      this.signIn(form.user_id.value.trim(), form.name.value.trim());
    });
    $("recent-users").addEventListener("click", (event) => {
      const button = event.target.closest("button[data-user-id]");
      if (button) this.signIn(button.dataset.userId, "");
    });
    $("sign-out").addEventListener("click", () => this.signOut());
    $("share-reads").addEventListener("change", (event) => this.shareReadReceipts(event.currentTarget.checked));
    $("new-channel-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.createChannel(event.currentTarget);
    });
    $("channel-list").addEventListener("click", (event) => {
      const button = event.target.closest("button[data-cid]");
      if (button) this.open(button.dataset.cid);
    });
    $("back").addEventListener("click", () => {
      $("app").dataset.view = "list";
      this.openCID = null;
      this.renderAll();
    });
    $("composer").addEventListener("submit", (event) => {
      event.preventDefault();
      const input = $("composer-text");
      const text = input.value.trim();
      if (!text) return;
      input.value = "";
      this.send(text);
    });
    $("send-voice").addEventListener("click", () => {
      // A tiny fake voice note: no recording, an attachment the server keeps and others may play (R14).
      this.send("", [{ type: "voiceRecording", title: "Voice note", duration: 2, asset_url: VOICE_NOTE_URL }]);
    });
    $("messages").addEventListener("click", (event) => {
      if (event.target.closest("button.load-older")) {
        this.loadOlder();
        return;
      }
      const resend = event.target.closest("button.resend");
      if (resend) {
        const entry = this.outbox.get(resend.dataset.messageId);
        if (entry) this.post(entry);
        return;
      }
      const play = event.target.closest("button.play");
      if (play) {
        this.play(play.dataset.messageId);
        return;
      }
      const indicator = event.target.closest("button.indicator");
      if (indicator) this.showReceipts(indicator.dataset.messageId);
    });
    $("receipts").addEventListener("close", () => {
      this.receiptsMessageID = null;
    });
    let scheduled = false;
    $("messages").addEventListener("scroll", () => {
      if (scheduled) return;
      scheduled = true;
      requestAnimationFrame(() => {
        scheduled = false;
        this.markReadIfSeen();
        if (isAtTop($("messages"))) this.loadOlder();
      });
    });
    document.addEventListener("visibilitychange", () => this.markReadIfSeen());
    window.addEventListener("focus", () => this.markReadIfSeen());
    window.addEventListener("resize", () => this.markReadIfSeen());
  }
}

new DemoApp().boot();
