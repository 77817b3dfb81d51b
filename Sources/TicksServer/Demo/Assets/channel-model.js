// What the client knows of a channel, and the read indicator of an own
// message computed from it (docs/concepts.md, "Message status").

const byCreation = (a, b) => Date.parse(a.created_at) - Date.parse(b.created_at);

/** A time to compare; none is earlier than any. */
const instant = (iso) => (iso ? Date.parse(iso) : -Infinity);

/** Counts the messages every model took in one by one (`add`), in order. */
let arrivals = 0;

/**
 * Where the count stands: take it before asking the server for a channel's
 * state, and give it to `load` with the answer.
 */
export const arrivalsSoFar = () => arrivals;

/**
 * One channel as the server described it, kept current by events. Cursors are
 * message ids; a cursor's position is its message's place in the loaded log
 * (1 = oldest loaded, 0 = none or older than what is loaded). The log is the
 * newest page, plus the older pages loaded since: positions are recounted
 * when older messages come, so a cursor that was older than the log resolves
 * as soon as its message is loaded.
 */
export class ChannelModel {
  /** `state` answers a query for the newest `pageSize` messages. */
  constructor(state, pageSize) {
    this.generation = 0;
    // When each message taken in one by one arrived (`arrivals`), by id.
    this.arrived = new Map();
    // Who played each voice note or video, by message id, as `message.played` told it
    // (R14: only plays this user may see); kept across reloads, which do not carry plays.
    this.played = new Map();
    this.load(state, pageSize);
  }

  /**
   * Takes an answer for the newest page. `asked` is `arrivalsSoFar()` when it
   * was asked for: messages taken in since are kept if the answer lacks them.
   */
  load(state, pageSize, asked = Infinity) {
    const page = [...(state.messages ?? [])].sort(byCreation);
    const later = this.takenInAfter(state, page, asked);
    const known = { reads: this.reads, readByAll: this.readByAllUpTo, deliveredToAll: this.deliveredToAllUpTo };
    this.channel = state.channel;
    this.members = state.members ?? [];
    this.messages = [...page, ...later];
    this.reindex();
    // Arrivals matter only for messages still loaded: the rest are forgotten.
    for (const id of this.arrived.keys()) if (!this.index.has(id)) this.arrived.delete(id);
    // The read states this user may see: their own, and others' unless hidden (R8, R10).
    this.reads = new Map((state.read ?? []).map((read) => [read.user.id, { ...read }]));
    // The newest own messages every other member has read / received, as the server
    // says (R13): it knows every member, loaded or not.
    this.readByAllUpTo = state.read_by_all_up_to ?? null;
    this.deliveredToAllUpTo = state.delivered_to_all_up_to ?? null;
    this.keepMovesOnto(later, known);
    // A short page is the whole history; a full one may have more before it.
    this.beginningLoaded = page.length < (pageSize ?? Infinity);
    // A page of older messages asked for before this load belongs to a log
    // that is gone: its answer is dropped (see `generation`).
    this.loadingOlder = false;
    this.generation += 1;
  }

  /**
   * The messages taken in after the answer was asked for (a send's answer
   * or a `message.new` can arrive before it) that it does not know and that
   * are newer than its whole page: the server wrote it before them. They are
   * kept, so a late answer does not take a message away; one taken in before
   * the question and missing from the answer is gone from the server
   * (deleted hard, truncated) and goes. A truncation still wins over a kept one.
   */
  takenInAfter(state, page, asked) {
    if (!this.messages) return [];
    const pageNewest = page[page.length - 1];
    const truncatedAt = instant(state.channel?.truncated_at);
    const inPage = new Set(page.map((message) => message.id));
    return this.messages.filter(
      (message) =>
        (this.arrived.get(message.id) ?? -Infinity) > asked &&
        !inPage.has(message.id) &&
        (!pageNewest || byCreation(message, pageNewest) > 0) &&
        Date.parse(message.created_at) > truncatedAt,
    );
  }

  /**
   * A cursor that had moved onto a message kept by `takenInAfter` is further
   * than the answer's: it stays, for members whose read state the answer
   * still shows (one who hid their reads meanwhile is not shown again, R10);
   * so do "read by all" and "delivered to all" (R13) on such a message.
   */
  keepMovesOnto(later, known) {
    if (later.length === 0 || !known.reads) return;
    const kept = new Set(later.map((message) => message.id));
    for (const [userID, before] of known.reads) {
      const read = this.reads.get(userID);
      if (!read) continue;
      if (kept.has(before.last_read_message_id)) {
        read.last_read_message_id = before.last_read_message_id;
        read.last_read = before.last_read;
        read.unread_messages = before.unread_messages;
        read.first_unread_message_id = before.first_unread_message_id;
      }
      if (kept.has(before.last_delivered_message_id)) {
        read.last_delivered_message_id = before.last_delivered_message_id;
        read.last_delivered_at = before.last_delivered_at;
      }
    }
    if (kept.has(known.readByAll)) this.readByAllUpTo = known.readByAll;
    if (kept.has(known.deliveredToAll)) this.deliveredToAllUpTo = known.deliveredToAll;
  }

  get cid() {
    return this.channel.cid;
  }
  get config() {
    return this.channel.config ?? {};
  }
  get name() {
    return this.channel.name || this.channel.id;
  }
  get memberCount() {
    return this.channel.member_count ?? this.members.length;
  }
  get newest() {
    return this.messages[this.messages.length - 1];
  }

  reindex() {
    this.index = new Map(this.messages.map((message, offset) => [message.id, offset + 1]));
  }

  has(messageID) {
    return this.index.has(messageID);
  }

  /** A message's position; null when it is not loaded (it may be newer: reload). */
  position(messageID) {
    if (messageID == null) return 0;
    return this.index.get(messageID) ?? null;
  }

  cursors(userID) {
    const read = this.reads.get(userID);
    if (!read) return { read: 0, delivered: 0 };
    const readAt = this.position(read.last_read_message_id) ?? 0;
    const deliveredAt = this.position(read.last_delivered_message_id) ?? 0;
    // R1: reading a message is also receiving it.
    return { read: readAt, delivered: Math.max(readAt, deliveredAt) };
  }

  unreadCount(userID) {
    return this.reads.get(userID)?.unread_messages ?? 0;
  }

  /**
   * Adds a stored message; false when it was already there. Its author has
   * read it (R4), but only the cursors the server shows `me` move: a message
   * from someone with private reads (R8, R10) must not make them a reader.
   * `me` sending leaves `me` nothing unread.
   */
  add(message, me) {
    if (this.index.has(message.id)) return false;
    arrivals += 1;
    this.arrived.set(message.id, arrivals);
    const newest = this.newest;
    this.messages.push(message);
    if (newest && byCreation(message, newest) < 0) {
      this.messages.sort(byCreation);
      this.reindex();
    } else {
      this.index.set(message.id, this.messages.length);
    }
    const author = this.reads.get(message.user.id);
    // R4 and R7: after sending, nothing before one's own message is unread.
    if (message.user.id === me && author) author.unread_messages = 0;
    if (author) {
      const readsShown =
        message.user.id === me ||
        (this.config.read_events !== false && author.user.privacy_settings?.read_receipts?.enabled !== false);
      this.moveCursor(author.user, readsShown ? "read" : "delivered", message.id, message.created_at);
    }
    return true;
  }

  /**
   * Adds a page of messages older than the loaded ones, with the read states
   * that came in the same answer; `complete` when the page reaches the first
   * message. A message already loaded is not added twice. Returns how many
   * were added.
   */
  addOlder(messages, reads, { complete, me }) {
    const fresh = messages.filter((message) => !this.index.has(message.id));
    // The page first: a stable sort keeps the server's order between equal times.
    this.messages = [...fresh, ...this.messages].sort(byCreation);
    this.reindex();
    this.mergeReads(reads, me);
    if (complete) this.beginningLoaded = true;
    return fresh.length;
  }

  /**
   * Takes in read states answered after the loaded ones (they are the
   * channel's current state). Others' cursors only move forward (R2), so each
   * keeps the further of the two; the user's own read cursor also moves back
   * (mark unread, R7), so for it the later move wins.
   */
  mergeReads(reads, me) {
    for (const fresh of reads) {
      const known = this.reads.get(fresh.user.id);
      if (!known) {
        this.reads.set(fresh.user.id, { ...fresh });
        continue;
      }
      // The answer's user is current (their privacy settings, R10).
      const merged = { ...known, user: fresh.user };
      const laterOwnMove =
        fresh.user.id === me && instant(fresh.last_read) > instant(known.last_read);
      if (laterOwnMove || this.isFurther(fresh.last_read_message_id, known.last_read_message_id)) {
        merged.last_read_message_id = fresh.last_read_message_id;
        merged.last_read = fresh.last_read;
        // The counts belong with the cursor they were counted from.
        merged.unread_messages = fresh.unread_messages;
        merged.first_unread_message_id = fresh.first_unread_message_id;
      }
      if (this.isFurther(fresh.last_delivered_message_id, known.last_delivered_message_id)) {
        merged.last_delivered_message_id = fresh.last_delivered_message_id;
        merged.last_delivered_at = fresh.last_delivered_at;
      }
      this.reads.set(fresh.user.id, merged);
    }
  }

  /**
   * Whether cursor `candidate` is past cursor `current` in the loaded log. An
   * id that is not loaded is older than the log, or newer (its `message.new`
   * is still on its way): a loaded cursor is kept over it until it resolves,
   * but it replaces a cursor that resolves to nothing.
   */
  isFurther(candidate, current) {
    if (candidate == null || candidate === current) return false;
    const candidateAt = this.position(candidate);
    const currentAt = this.position(current);
    if (candidateAt == null) return !currentAt;
    return candidateAt > (currentAt ?? 0);
  }

  /**
   * Puts an edited or deleted message in place of the loaded one (false when
   * it is not loaded). Its place, and so every receipt, stays.
   */
  replace(message) {
    const position = this.index.get(message.id);
    if (position == null) return false;
    this.messages[position - 1] = message;
    return true;
  }

  /**
   * Moves a member's cursor forward to a message (never back, R2); "reload"
   * when the message is not loaded.
   */
  moveCursor(user, kind, messageID, at) {
    const target = this.position(messageID);
    if (target == null) return "reload";
    const before = this.cursors(user.id);
    const read = this.reads.get(user.id) ?? { user, unread_messages: 0 };
    let changed = false;
    if (kind === "read" && target > before.read) {
      read.last_read_message_id = messageID;
      read.last_read = at;
      changed = true;
    }
    if (target > before.delivered) {
      read.last_delivered_message_id = messageID;
      read.last_delivered_at = at;
      changed = true;
    }
    if (changed) this.reads.set(user.id, read);
    return changed ? "changed" : "unchanged";
  }
}

/**
 * The indicator of one own message (docs/concepts.md, "Message status"): null
 * when hidden; otherwise its status, text alternative and readers.
 */
export function indicatorFor(channel, message, me, outboxEntry) {
  // R8: no status at all, not even pending or failed (a failed message keeps its Resend button).
  if (channel.config.read_events === false) return null;
  if (outboxEntry) {
    return outboxEntry.status === "failed"
      ? { status: "failed", label: "Not sent", readers: [] }
      : { status: "pending", label: "Sending", readers: [] };
  }
  if (message.user.id !== me) return null;
  const position = channel.position(message.id);
  const others = [...channel.reads.values()].filter((read) => read.user.id !== me);
  const readers = others
    .filter((read) => channel.cursors(read.user.id).read >= position)
    .sort((a, b) => Date.parse(b.last_read ?? 0) - Date.parse(a.last_read ?? 0));
  const isGroup = channel.memberCount > 2;
  if (readers.length > 0) {
    const everyone = isGroup && position <= (channel.position(channel.readByAllUpTo) ?? 0);
    const label = everyone ? "Read by everyone" : isGroup ? `Read by ${readers.length}` : "Read";
    return { status: "read", label, readers, isGroup, everyone };
  }
  const delivered =
    channel.config.delivery_events !== false &&
    others.some((read) => channel.cursors(read.user.id).delivered >= position);
  return delivered ? { status: "delivered", label: "Delivered", readers: [] } : { status: "sent", label: "Sent", readers: [] };
}

/** The attachment types a member may mark played (R14). */
const PLAYABLE = new Set(["audio", "video", "voiceRecording"]);

/** Whether `message` is a voice note or video (an attachment of a playable type). */
export function isPlayable(message) {
  return (message.attachments ?? []).some((attachment) => PLAYABLE.has(attachment?.type));
}
