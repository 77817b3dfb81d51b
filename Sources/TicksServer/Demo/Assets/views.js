// Drawing: DOM elements for messages and their indicators, and the
// reconciliation that keeps unchanged elements (and their focus) in place.

import { indicatorFor, isPlayable } from "./channel-model.js";

const ICONS = {
  pending:
    '<svg viewBox="0 0 16 16" aria-hidden="true"><circle cx="8" cy="8" r="6.2" fill="none" stroke="currentColor" stroke-width="1.6"/><path d="M8 4.6V8l2.4 1.5" fill="none" stroke="currentColor" stroke-width="1.6" stroke-linecap="round"/></svg>',
  failed:
    '<svg viewBox="0 0 16 16" aria-hidden="true"><circle cx="8" cy="8" r="7" fill="currentColor"/><path d="M8 4v5M8 11.2v.6" stroke="#fff" stroke-width="1.8" stroke-linecap="round"/></svg>',
  sent: '<svg viewBox="0 0 20 14" aria-hidden="true"><path d="M3 7.5l3.2 3.2L13.5 3" fill="none" stroke="currentColor" stroke-width="1.8" stroke-linecap="round" stroke-linejoin="round"/></svg>',
  double:
    '<svg viewBox="0 0 20 14" aria-hidden="true"><path d="M1.5 7.5l3.2 3.2L12 3M8.6 10.2l.5.5L16.4 3" fill="none" stroke="currentColor" stroke-width="1.8" stroke-linecap="round" stroke-linejoin="round"/></svg>',
};

export function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "className") node.className = value;
    else if (name === "html") node.innerHTML = value; // only our own constant icons
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined && child !== false) node.append(child);
  }
  return node;
}

function initials(user) {
  const words = (user.name || user.id).split(/[\s_\-@.]+/).filter(Boolean);
  const letters = words.length > 1 ? words[0][0] + words[1][0] : (words[0] ?? "?").slice(0, 2);
  return letters.toUpperCase();
}

export const displayName = (user) => user.name || user.id;

export function avatar(user) {
  return element("span", { className: "avatar", title: displayName(user) }, initials(user));
}

const clockTime = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
export const exactTime = new Intl.DateTimeFormat(undefined, {
  year: "numeric",
  month: "short",
  day: "numeric",
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
  fractionalSecondDigits: 3,
});

export function timeElement(iso, format) {
  return element("time", { datetime: iso, title: iso }, format.format(new Date(iso)));
}

/** A receipt log pruned past a message keeps only an upper bound: the minute, no seconds. */
const approximateTime = new Intl.DateTimeFormat(undefined, {
  year: "numeric",
  month: "short",
  day: "numeric",
  hour: "2-digit",
  minute: "2-digit",
});

/**
 * A receipt's time: exact ("Nov 26, 14:02:31.123"), or — when the server says the
 * move that made it was pruned from its receipt log (`read_at_exact: false`) —
 * "by Nov 26, 14:02", an upper bound, never shown as if it were the moment.
 */
export function receiptTimeElement(iso, exact) {
  if (exact !== false) return timeElement(iso, exactTime);
  // Rounded up to the minute, so "by 14:02" stays true for a time of 14:01:31.
  const bound = new Date(Math.ceil(Date.parse(iso) / 60_000) * 60_000);
  return element(
    "time",
    { datetime: iso, title: `at the latest ${iso}: the exact time is no longer kept`, "data-approximate": true },
    `by ${approximateTime.format(bound)}`,
  );
}

/** The indicator element: its `data-status` and `data-read-count` are for people and tests alike. */
function indicatorElement(indicator, messageID) {
  const common = {
    className: "indicator",
    "data-status": indicator.status,
    "data-read-count": indicator.readers.length,
    "data-everyone": indicator.everyone ? "true" : "false",
    "data-message-id": messageID,
    title: indicator.label,
  };
  if (indicator.status === "pending" || indicator.status === "failed") {
    return element("span", { ...common, role: "img", "aria-label": indicator.label, html: ICONS[indicator.status] });
  }
  // In a group, the last three readers' avatars (most recent first), "and N more"; a pair needs no avatar.
  const shown = indicator.isGroup ? indicator.readers.slice(0, 3) : [];
  const more = indicator.isGroup ? indicator.readers.length - shown.length : 0;
  return element(
    "button",
    { ...common, type: "button", "aria-label": indicator.label, "aria-haspopup": "dialog" },
    element("span", { html: indicator.status === "sent" ? ICONS.sent : ICONS.double }),
    indicator.isGroup ? element("span", { className: "count", "aria-hidden": "true" }, String(indicator.readers.length)) : null,
    indicator.everyone ? element("span", { className: "everyone", "aria-hidden": "true" }, "everyone") : null,
    shown.length > 0 ? element("span", { className: "readers", "aria-hidden": "true" }, shown.map((read) => avatar(read.user))) : null,
    more > 0 ? element("span", { className: "more", "aria-hidden": "true" }, `and ${more} more`) : null,
  );
}

export function messageElement(channel, message, me, outboxEntry) {
  const own = message.user.id === me;
  const indicator = own ? indicatorFor(channel, message, me, outboxEntry) : null;
  const deleted = message.type === "deleted";
  const edited = !deleted && message.message_text_updated_at != null;
  const replies = message.reply_count ?? 0;
  const playable = !deleted && isPlayable(message);
  return element(
    "li",
    {
      className: (own ? "message own" : "message") + (deleted ? " deleted" : ""),
      "data-key": message.id,
      "data-state": deleted ? "deleted" : edited ? "edited" : "regular",
      "data-played": playable ? String(playedBy(channel, message).length > 0) : null,
    },
    own ? null : element("span", { className: "author" }, displayName(message.user)),
    element("span", { className: "text" }, deleted ? "This message was deleted" : message.text ?? ""),
    playable ? playElement(channel, message, own, me) : null,
    element(
      "span",
      { className: "meta" },
      edited ? element("span", { className: "edited", title: `Edited ${message.message_text_updated_at}` }, "edited") : null,
      replies > 0
        ? element("span", { className: "replies", "data-reply-count": String(replies) }, replies === 1 ? "1 reply" : `${replies} replies`)
        : null,
      timeElement(message.created_at, clockTime),
      indicator ? indicatorElement(indicator, message.id) : null,
      outboxEntry?.status === "failed"
        ? element("button", { type: "button", className: "resend", "data-message-id": message.id, title: outboxEntry.error }, "Resend")
        : null,
    ),
  );
}

/** Who played `message` (R14), its author left out. */
function playedBy(channel, message) {
  return [...(channel.played.get(message.id) ?? [])].filter((id) => id !== message.user.id);
}

/**
 * A voice note or video: a Play button on others' messages (pressing it marks it played)
 * and the played mark — "Played", or in a group "Played by N" — once anyone played it.
 */
function playElement(channel, message, own, me) {
  const players = playedBy(channel, message);
  const isGroup = channel.memberCount > 2;
  const label = players.length === 0 ? "Not played yet" : isGroup ? `Played by ${players.length}` : "Played";
  const kind = (message.attachments ?? []).some((attachment) => attachment?.type === "video") ? "Video" : "Voice note";
  return element(
    "span",
    { className: "voice", "data-played-count": String(players.length) },
    element("span", { className: "voice-kind" }, kind),
    own || players.includes(me)
      ? null
      : element("button", { type: "button", className: "play", "data-message-id": message.id, "aria-label": `Play ${kind.toLowerCase()}` }, "▶ Play"),
    players.length > 0
      ? element("span", { className: "played", "aria-label": label, title: label }, isGroup ? `▶ played ${players.length}` : "▶ played")
      : null,
  );
}

/**
 * The first item of the message list: a button that loads older messages, or
 * a note that the conversation begins here (nothing in an empty channel).
 * While a page loads the button stays, and focusable, but says so.
 */
export function historyElement(channel) {
  const common = { className: "history", "data-key": "history" };
  if (channel.beginningLoaded) {
    if (channel.messages.length === 0) return null;
    return element("li", { ...common, "data-state": "beginning" }, "Beginning of the conversation");
  }
  const loading = channel.loadingOlder;
  return element(
    "li",
    { ...common, "data-state": loading ? "loading" : "more" },
    element(
      "button",
      { type: "button", id: "load-older", className: "load-older link", "aria-disabled": loading ? "true" : null },
      loading ? "Loading older messages…" : "Load older messages",
    ),
  );
}

/**
 * Where the first message visible in a scrolled list is, so that it can stay
 * in place while messages are added above it (`keepScroll`).
 */
export function scrollAnchor(list) {
  const top = list.getBoundingClientRect().top;
  for (const node of list.children) {
    if (node.classList.contains("history")) continue;
    const rect = node.getBoundingClientRect();
    if (rect.bottom > top) return { key: node.dataset.key, offset: rect.top - top, scrollTop: list.scrollTop };
  }
  return { key: null, offset: 0, scrollTop: list.scrollTop };
}

/** Scrolls `list` so that the anchor's message is where it was; if it is gone, back to the same offset. */
export function keepScroll(list, anchor) {
  const node = anchor.key ? list.querySelector(`:scope > [data-key="${CSS.escape(anchor.key)}"]`) : null;
  if (!node) {
    list.scrollTop = anchor.scrollTop;
    return;
  }
  list.scrollTop += node.getBoundingClientRect().top - list.getBoundingClientRect().top - anchor.offset;
}

/**
 * Makes `list`'s children the `fresh` nodes (each with a `data-key`), keeping
 * every existing child that is unchanged, so that focus, hover and scroll stay
 * put while events arrive; when the focused child had to be replaced, the
 * same control in its replacement gets the focus.
 */
export function reconcile(list, fresh) {
  const focused = list.contains(document.activeElement) ? document.activeElement : null;
  const focusedKey = focused?.closest("[data-key]")?.dataset.key;
  const focusedControl = focused?.classList[0] ? `.${focused.classList[0]}` : focused?.tagName;
  const existing = new Map([...list.children].map((node) => [node.dataset.key, node]));
  fresh.forEach((candidate, offset) => {
    let node = existing.get(candidate.dataset.key);
    if (!node || !node.isEqualNode(candidate)) {
      node?.replaceWith(candidate);
      node = candidate;
    }
    if (list.children[offset] !== node) list.insertBefore(node, list.children[offset] ?? null);
  });
  while (list.children.length > fresh.length) list.lastElementChild.remove();
  if (focused && !focused.isConnected && focusedKey && focusedControl) {
    list.querySelector(`[data-key="${CSS.escape(focusedKey)}"] ${focusedControl}`)?.focus();
  }
}
