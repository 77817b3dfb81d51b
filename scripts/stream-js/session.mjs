// The session of scripts/check-stream-js: Stream's JavaScript client
// (`stream-chat`, bundled by that script from its unmodified source into a
// temporary folder) driven through what a UI kit does, against one running
// `ticks serve`. Written for Ticks; no code of the SDK is copied here.
//
// Environment (set by scripts/check-stream-js):
//   STREAM_JS_BUNDLE  the bundled SDK (CommonJS)
//   TICKS_URL         the server, e.g. http://127.0.0.1:40123
//   TICKS_API_KEY, TICKS_API_SECRET
//   STORE             a label for the output (sqlite, postgres)
//   TICKS_RESTART_CUE a file the script creates once it has restarted the
//                     server after this session printed RESTART-SERVER (7d)
//   STREAM_JS_VERBOSE=1  print every event and request as it happens
//
// Prints one line per check, `PASS <store> <id> <title>` or `FAIL …` with
// the reason below it, then `N passed, N failed`; exits 1 on any failure.
// Any uncaught exception, unhandled rejection, error the SDK logs (its
// logger at level error, console.error, console.warn), or throw inside the
// SDK's event handling (its dispatchEvent, or a listener given to `on`)
// fails the check during which it happened, and check 8a.

import { createRequire } from 'node:module';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';

const require = createRequire(import.meta.url);
const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const BUNDLE = env('STREAM_JS_BUNDLE');
const BASE_URL = env('TICKS_URL');
const WS_URL = BASE_URL.replace(/^http/, 'ws');
const KEY = env('TICKS_API_KEY');
const SECRET = env('TICKS_API_SECRET');
const STORE = process.env.STORE ?? 'store';
const VERBOSE = process.env.STREAM_JS_VERBOSE === '1';

// ---------------------------------------------------------------- problems

/** Everything that went wrong outside an assertion: SDK errors, throws, rejections. */
const problems = [];

const describe = (value) => {
  if (value instanceof Error) {
    const response = value.response?.data ? ` response: ${JSON.stringify(value.response.data)}` : '';
    return `${value.stack ?? value.message}${response}`;
  }
  if (typeof value === 'string') return value;
  try {
    return JSON.stringify(value);
  } catch {
    return String(value);
  }
};

function problem(where, ...details) {
  const text = `${where}: ${details.map(describe).join(' ')}`;
  problems.push(text);
  if (VERBOSE) process.stderr.write(`  !! ${text}\n`);
}

process.on('uncaughtException', (error) => problem('uncaught exception', error));
process.on('unhandledRejection', (reason) => problem('unhandled rejection', reason));
for (const level of ['error', 'warn']) {
  const original = console[level].bind(console);
  console[level] = (...args) => {
    problem(`console.${level}`, ...args);
    original(...args);
  };
}

// ------------------------------------------------------------- the SDK

const { StreamChat, Channel } = require(BUNDLE);

// Every listener given to client.on / channel.on runs inside a guard: a throw
// (or a rejected promise of an async listener, such as the channel list's)
// is recorded instead of vanishing or killing the socket's handler.
const guards = new WeakMap();
function guard(owner, type, listener) {
  if (typeof listener !== 'function') return listener;
  if (guards.has(listener)) return guards.get(listener);
  const guarded = function (event) {
    try {
      const result = listener.apply(this, arguments);
      if (result && typeof result.then === 'function') {
        result.then(undefined, (error) =>
          problem(`${owner}: async listener for ${type} rejected on ${event?.type} (${event?.cid ?? '-'})`, error));
      }
      return result;
    } catch (error) {
      problem(`${owner}: listener for ${type} threw on ${event?.type} (${event?.cid ?? '-'})`, error);
    }
  };
  guards.set(listener, guarded);
  return guarded;
}
for (const cls of [StreamChat, Channel]) {
  const { on, off } = cls.prototype;
  const ownerOf = (self) => (self instanceof Channel ? `channel ${self.cid} of ${self.getClient().userID}` : `client ${self.userID}`);
  cls.prototype.on = function (a, b) {
    if (typeof a === 'function') return on.call(this, guard(ownerOf(this), 'all', a));
    return on.call(this, a, guard(ownerOf(this), a, b));
  };
  cls.prototype.off = function (a, b) {
    if (typeof a === 'function') return off.call(this, guards.get(a) ?? a);
    return off.call(this, a, guards.get(b) ?? b);
  };
}

// ------------------------------------------------------------- helpers

class CheckFailure extends Error {}
const assert = (condition, message) => {
  if (!condition) throw new CheckFailure(message);
};
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(what, probe, timeoutMs = 10000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      last = await probe();
      if (last) return last;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) {
      throw new CheckFailure(`timed out after ${timeoutMs / 1000}s waiting for ${what}` +
        (last instanceof Error ? ` (last error: ${last.message})` : ''));
    }
    await sleep(50);
  }
}

const results = [];
/** A pattern of the problems the running check expects (set by the check, cleared after it). */
let tolerated = null;
async function check(id, title, body) {
  const before = problems.length;
  let note;
  let failure;
  try {
    note = await body();
  } catch (error) {
    failure = error instanceof CheckFailure ? error.message : describe(error);
  }
  // What a check expects to go wrong (7d: calls made while the server restarts are refused) is
  // not an SDK error: it is dropped here, so neither this check nor 8a counts it.
  if (tolerated) {
    const kept = problems.slice(before).filter((p) => !tolerated.test(p));
    problems.splice(before, problems.length - before, ...kept);
    tolerated = null;
  }
  const fresh = problems.slice(before);
  const passed = !failure && fresh.length === 0;
  results.push({ id, passed });
  console.log(`${passed ? 'PASS' : 'FAIL'} ${STORE} ${id} ${title}${note ? ` — ${note}` : ''}`);
  if (failure) console.log(indent(failure));
  for (const p of fresh) console.log(indent(`SDK error during this check: ${p}`));
  return passed;
}
const indent = (text) => text.split('\n').map((line) => `    ${line}`).join('\n');

/** One user's client, with the record of what it heard and asked. */
function makeClient(userId) {
  const client = new StreamChat(KEY, {
    baseURL: BASE_URL,
    allowServerSideConnect: true, // this is Node, acting as a browser would
    timeout: 10000,
    logger: (level, message, extra) => {
      // The close codes the SDK's socket saw ("onclose() - onclose callback - 1011"), for 7d.
      const closed = /onclose\(\) - onclose callback - (\d+)/.exec(message);
      if (closed) client.closeCodes.push({ code: Number(closed[1]), at: Date.now() });
      if (level === 'error') problem(`${userId}: SDK logged an error`, message, extra?.error ?? extra ?? '');
    },
  });
  client.wsBaseURL = WS_URL; // the client derives it from baseURL (and rewrites :3030 to :8800)
  client.events = [];
  client.requests = [];
  client.closeCodes = [];
  const dispatch = client.dispatchEvent;
  client.dispatchEvent = (event) => {
    client.events.push(event);
    if (VERBOSE) process.stderr.write(`  [${userId}] event ${event.type} ${event.cid ?? ''}\n`);
    try {
      return dispatch(event);
    } catch (error) {
      problem(`${userId}: the SDK threw while handling ${event.type} (${event.cid ?? '-'})`, error);
    }
  };
  const record = (config, status, data) => {
    const url = new URL(config.url, BASE_URL);
    let body = config.data;
    try {
      body = typeof body === 'string' ? JSON.parse(body) : body;
    } catch {
      // not JSON
    }
    const entry = { method: config.method.toUpperCase(), path: url.pathname, query: url.search, body, status, data, at: Date.now() };
    client.requests.push(entry);
    if (VERBOSE) process.stderr.write(`  [${userId}] ${entry.method} ${entry.path} → ${status}\n`);
  };
  client.axiosInstance.interceptors.response.use(
    (response) => {
      record(response.config, response.status, response.data);
      return response;
    },
    (error) => {
      if (error.config) record(error.config, error.response?.status ?? 'no answer', error.response?.data);
      return Promise.reject(error);
    },
  );
  return client;
}

const refOf = (message) => ({ msgId: message.id, timestampMs: new Date(message.created_at).getTime() });

/** What a message list shows under one's own message: React's MessageStatus logic, from the receipt tracker. */
function receiptStatus(client, channel, message) {
  const me = client.userID;
  const ref = refOf(message);
  const readers = channel.messageReceiptsTracker.readersForMessage(ref).map((u) => u.id).filter((id) => id !== me);
  const delivered = channel.messageReceiptsTracker.deliveredForMessage(ref).map((u) => u.id).filter((id) => id !== me);
  const status = readers.length ? 'read' : delivered.length ? 'delivered' : 'sent';
  return { status, readers: readers.sort(), delivered: delivered.sort() };
}

/** The server's own created_at of each message sent, with its microseconds (the SDK keeps milliseconds). */
const serverCreatedAt = {};
const createdAtOf = (message) => serverCreatedAt[message.id] ?? new Date(message.created_at).toISOString();

const findMessage = (channel, id) => channel.state.messages.find((m) => m.id === id);
const eventsOf = (client, type, predicate = () => true) => client.events.filter((e) => e.type === type && predicate(e));

/** Sends as React's Channel does: compose, optimistic copy ("sending"), send, then the answer ("received"). */
async function sendLikeTheUiKit(channel, text) {
  channel.messageComposer.textComposer.setText(text);
  const composed = await channel.messageComposer.compose();
  assert(composed, 'the message composer discarded the message');
  const { localMessage, message, sendOptions } = composed;
  channel.state.addMessageSorted(localMessage, true);
  const optimistic = findMessage(channel, localMessage.id);
  assert(optimistic?.status === 'sending', `the optimistic copy is not "sending": ${optimistic?.status}`);
  channel.messageComposer.clear();
  const response = await channel.sendMessage(message, sendOptions);
  if (response.message) serverCreatedAt[response.message.id] = response.message.created_at;
  const existing = findMessage(channel, message.id);
  const newer = new Date(response.message?.updated_at ?? 0).getTime() > (existing?.updated_at?.getTime?.() ?? 0);
  if (response.message && (newer || existing?.status === 'sending')) {
    channel.state.addMessageSorted({ ...response.message, status: 'received' }, true);
  }
  return response.message;
}

/** GET /messages/{id}/receipts (Ticks' own call), through the client's own HTTP layer. */
const receiptsOf = (client, messageId) => client.get(`${client.baseURL}/messages/${encodeURIComponent(messageId)}/receipts`);

// ------------------------------------------------------------- the session

const run = Date.now().toString(36);
const USERS = ['alice', 'bob', 'carol'];
const NAMES = { alice: 'Alice', bob: 'Bob', carol: 'Carol' };
const cid1Id = `js-team-${run}`;
const cid2Id = `js-side-${run}`;
const cid1 = `messaging:${cid1Id}`;
const cid2 = `messaging:${cid2Id}`;

const clients = {};
let aliceCh;
let bobCh;
let carolManager;
let m1;
let m2;
let m3;
let m4;

await check('1', 'alice, bob and carol connect (connectUser, one StreamChat each)', async () => {
  const server = new StreamChat(KEY, SECRET, { baseURL: BASE_URL, timeout: 10000 });
  await server.upsertUsers(USERS.map((id) => ({ id, name: NAMES[id] })));
  for (const id of USERS) {
    const client = makeClient(id);
    clients[id] = client;
    const open = await client.connectUser({ id, name: NAMES[id] }, server.createToken(id));
    assert(open?.me?.id === id, `connectUser answered no "me" for ${id}: ${JSON.stringify(open)}`);
    assert(client.wsConnection?.connectionID, `${id} has no connection_id`);
    assert(Array.isArray(client.mutedUsers) && Array.isArray(client.mutedChannels), `${id}: me.mutes / me.channel_mutes are not arrays`);
  }
  const ids = new Set(USERS.map((id) => clients[id].wsConnection.connectionID));
  assert(ids.size === 3, 'the three connections share a connection_id');
  return `socket ${WS_URL}/connect`;
});

await check('2a', 'alice creates channel 1 with alice, bob, carol and watches it', async () => {
  aliceCh = clients.alice.channel('messaging', cid1Id, { members: USERS });
  await aliceCh.watch();
  const members = Object.keys(aliceCh.state.members).sort();
  assert(members.join() === USERS.join(), `members: ${members}`);
  const config = aliceCh.getConfig();
  assert(config?.read_events && config?.delivery_events, `channel config lacks read_events/delivery_events: ${JSON.stringify(config)}`);
  const caps = aliceCh.data?.own_capabilities;
  assert(Array.isArray(caps), `the channel has no own_capabilities (${JSON.stringify(caps)})`);
  for (const cap of ['send-message', 'read-events', 'delivery-events']) {
    assert(caps.includes(cap), `own_capabilities lacks ${cap}: ${JSON.stringify(caps)}`);
  }
});

await check('2b', "bob finds it: queryChannels({members: {$in: ['bob']}}, {last_message_at: -1}, {watch, state})", async () => {
  const channels = await clients.bob.queryChannels({ members: { $in: ['bob'] } }, { last_message_at: -1 }, { watch: true, state: true });
  bobCh = channels.find((c) => c.cid === cid1);
  assert(bobCh, `not in bob's result: ${channels.map((c) => c.cid)}`);
  assert(bobCh.initialized && bobCh.getConfig()?.delivery_events, "bob's channel is not initialized with its config");
});

await check('2c', "carol's channel list (the SDK's ChannelManager, as the UI kits use it) loads channel 1", async () => {
  carolManager = clients.carol.createChannelManager({});
  carolManager.registerSubscriptions();
  await carolManager.queryChannels({ members: { $in: ['carol'] } }, { last_message_at: -1 }, { watch: true, state: true });
  const { channels, error } = carolManager.state.getLatestValue();
  assert(!error, `the channel list failed: ${error?.message}`);
  assert(channels.some((c) => c.cid === cid1), `not in carol's list: ${channels.map((c) => c.cid)}`);
});

await check('3a', "alice sends a message (composer, optimistic copy); it goes to sent (✓)", async () => {
  m1 = await sendLikeTheUiKit(aliceCh, 'Hello from alice');
  assert(m1?.id, 'no message in the answer');
  await waitFor("alice's own message.new", () => eventsOf(clients.alice, 'message.new', (e) => e.message?.id === m1.id).length);
  const copies = aliceCh.state.messages.filter((m) => m.id === m1.id);
  assert(copies.length === 1, `alice's list holds ${copies.length} copies of the message`);
  const local = copies[0];
  assert(local.status === 'received' && !local.error, `status ${local.status}, error ${JSON.stringify(local.error)}`);
  m1 = local;
  return `status "${local.status}", receipt status "${receiptStatus(clients.alice, aliceCh, m1).status}"`;
});

await check('3b', "bob's watched channel gets message.new and counts it unread", async () => {
  await waitFor('message.new on bob\'s client', () => eventsOf(clients.bob, 'message.new', (e) => e.message?.id === m1.id).length);
  assert(findMessage(bobCh, m1.id), "the message is not in bob's channel state");
  assert(bobCh.countUnread() === 1, `bob's unread count is ${bobCh.countUnread()}`);
});

await check('3c', "bob's SDK reports the delivery itself (POST /channels/delivered, no manual call)", async () => {
  const report = await waitFor("bob's POST /channels/delivered", () =>
    clients.bob.requests.find((r) => r.path === '/channels/delivered' &&
      (r.body?.latest_delivered_messages ?? []).some((d) => d.cid === cid1 && d.id === m1.id)), 5000);
  assert(report.status >= 200 && report.status < 300, `answered ${report.status}: ${JSON.stringify(report.data)}`);
  const arrived = eventsOf(clients.bob, 'message.new', (e) => e.message?.id === m1.id)[0].received_at;
  return `${report.at - new Date(arrived).getTime()} ms after message.new`;
});

await check('3d', "alice sees ✓✓: her receipt tracker has the message delivered to bob", async () => {
  await waitFor("alice's message.delivered from bob", () => eventsOf(clients.alice, 'message.delivered', (e) => e.cid === cid1 && e.user?.id === 'bob').length);
  const status = await waitFor('bob in deliveredForMessage', () => {
    const s = receiptStatus(clients.alice, aliceCh, m1);
    return s.delivered.includes('bob') && s;
  }, 3000);
  assert(!status.readers.includes('bob'), `bob counts as a reader before reading: ${JSON.stringify(status)}`);
  return `status "${status.status}", delivered to [${status.delivered}]`;
});

await check('4a', 'bob marks read (channel.markRead()); alice sees it read by bob', async () => {
  const answer = await bobCh.markRead();
  assert(answer, 'markRead sent nothing (the client thinks read_events is off)');
  // The SDK resets the count from its own message.read event, which may come after the answer.
  await waitFor("bob's unread count back to 0", () => bobCh.countUnread() === 0);
  const status = await waitFor('bob among the readers', () => {
    const s = receiptStatus(clients.alice, aliceCh, m1);
    return s.readers.includes('bob') && s;
  });
  assert(status.status === 'read', `status ${status.status}`);
});

await check('4b', 'carol marks read too; alice sees "read by 2"', async () => {
  const carolCh = clients.carol.activeChannels[cid1];
  assert(carolCh, "carol's client holds no channel 1");
  await waitFor("the message in carol's channel", () => findMessage(carolCh, m1.id));
  const answer = await carolCh.markRead();
  assert(answer, 'markRead sent nothing');
  const status = await waitFor('2 readers', () => {
    const s = receiptStatus(clients.alice, aliceCh, m1);
    return s.readers.length === 2 && s;
  });
  return `read by [${status.readers}]`;
});

/** alice's SDK view of each member's read and delivery of `messages`, against GET /messages/{id}/receipts. */
async function compareWithServer(messages) {
  const mismatches = [];
  const table = [];
  for (const message of messages) {
    const server = await receiptsOf(clients.alice, message.id);
    const ref = refOf(message);
    for (const user of ['bob', 'carol']) {
      const entry = (server.receipts ?? []).find((r) => r.user?.id === user);
      const serverRead = Boolean(entry?.read_at);
      const serverDelivered = Boolean(entry?.delivered_at);
      const sdkRead = aliceCh.messageReceiptsTracker.hasUserRead(ref, user);
      const sdkDelivered = aliceCh.messageReceiptsTracker.hasUserDelivered(ref, user);
      table.push(`${message.text.slice(0, 12)}/${user}: read ${sdkRead ? 'y' : 'n'}${serverRead ? 'y' : 'n'} delivered ${sdkDelivered ? 'y' : 'n'}${serverDelivered ? 'y' : 'n'}`);
      if (sdkRead !== serverRead || sdkDelivered !== serverDelivered) {
        const progress = aliceCh.messageReceiptsTracker.getUserProgress(user);
        mismatches.push(`message ${message.id} (${message.text}, created_at ${createdAtOf(message)}), ${user}: ` +
          `SDK read=${sdkRead} delivered=${sdkDelivered}; server read_at=${entry?.read_at ?? null} delivered_at=${entry?.delivered_at ?? null}; ` +
          `SDK read ref ${progress ? new Date(progress.lastReadRef.timestampMs).toISOString?.() ?? progress.lastReadRef.timestampMs : 'none'}, ` +
          `read[${user}] ${JSON.stringify(aliceCh.state.read[user] ?? null)}`);
      }
    }
  }
  return { mismatches, table };
}

await check('4c', "alice's live read-by and delivered agree with GET /messages/{id}/receipts", async () => {
  const { mismatches, table } = await compareWithServer([m1]);
  assert(!mismatches.length, mismatches.join('\n'));
  return `SDK/server: ${table.join('; ')}`;
});

await check('5a', 'alice sends a second message; bob and carol read it', async () => {
  m2 = await sendLikeTheUiKit(aliceCh, 'Second from alice');
  m2 = findMessage(aliceCh, m2.id) ?? m2;
  const carolCh = clients.carol.activeChannels[cid1];
  await waitFor("the second message at bob's and carol's", () => findMessage(bobCh, m2.id) && findMessage(carolCh, m2.id));
  assert(await bobCh.markRead(), 'bob: markRead sent nothing');
  assert(await carolCh.markRead(), 'carol: markRead sent nothing');
  await waitFor('the second message read by 2', () => receiptStatus(clients.alice, aliceCh, m2).readers.length === 2);
});

await check('5b', 'bob marks the second message unread (markUnread({message_id})); his own state follows', async () => {
  await bobCh.markUnread({ message_id: m2.id });
  const event = await waitFor("bob's notification.mark_unread", () =>
    eventsOf(clients.bob, 'notification.mark_unread', (e) => e.cid === cid1)[0]);
  assert(event.first_unread_message_id === m2.id, `first_unread_message_id ${event.first_unread_message_id}, expected ${m2.id}`);
  assert(event.last_read_at, 'no last_read_at');
  assert(bobCh.countUnread() === 1, `bob's unread count is ${bobCh.countUnread()}`);
  const own = bobCh.messageReceiptsTracker;
  assert(own.hasUserRead(refOf(m1), 'bob') && !own.hasUserRead(refOf(m2), 'bob'),
    `bob's own tracker: read first=${own.hasUserRead(refOf(m1), 'bob')} second=${own.hasUserRead(refOf(m2), 'bob')} (last_read_at ${event.last_read_at}, second created_at ${createdAtOf(m2)} on the server, ${new Date(m2.created_at).getTime()} ms in the SDK; last_read_at is ${new Date(event.last_read_at).getTime()} ms there)`);
});

await check('5c', "after a reload (new queryChannels), alice's read-by agrees with GET /messages/{id}/receipts, per user", async () => {
  const [reloaded] = await clients.alice.queryChannels({ cid: { $in: [cid1] } }, { last_message_at: -1 }, { watch: true, state: true });
  assert(reloaded === aliceCh, 'the reload gave another Channel object');
  const first = findMessage(aliceCh, m1.id);
  const second = findMessage(aliceCh, m2.id);
  assert(first && second, 'the messages are not in the reloaded state');
  const { mismatches, table } = await compareWithServer([first, second]);
  assert(!mismatches.length, mismatches.join('\n'));
  const s2 = receiptStatus(clients.alice, aliceCh, second);
  assert(s2.readers.join() === 'carol', `second message read by [${s2.readers}], expected [carol]`);
  return `SDK/server: ${table.join('; ')}`;
});

await check('6a', 'alice creates channel 2; bob (watching channel 1 only) gets notification.added_to_channel and notification.message_new with the channel and its config', async () => {
  const ch2 = clients.alice.channel('messaging', cid2Id, { members: USERS });
  await ch2.watch();
  m3 = await sendLikeTheUiKit(ch2, 'A side conversation');
  let fresh;
  try {
    fresh = await waitFor("bob's notification.message_new", () =>
      eventsOf(clients.bob, 'notification.message_new', (e) => e.message?.id === m3.id)[0]);
  } catch (error) {
    fresh = undefined;
  }
  const added = eventsOf(clients.bob, 'notification.added_to_channel', (e) => (e.channel?.cid ?? e.cid) === cid2)[0];
  const missing = [!added && 'notification.added_to_channel', !fresh && 'notification.message_new'].filter(Boolean);
  assert(!missing.length, `bob got no ${missing.join(' and no ')} for ${cid2} within 10 s; he heard: ` +
    (clients.bob.events.filter((e) => (e.cid ?? e.channel?.cid) === cid2).map((e) => e.type).join(', ') || 'nothing of it'));
  assert(added.channel?.id === cid2Id && added.channel?.type === 'messaging', `added_to_channel.channel: ${JSON.stringify(added.channel)}`);
  assert(fresh.channel?.id === cid2Id && fresh.channel?.config, `notification.message_new.channel lacks id or config: ${JSON.stringify(fresh.channel)}`);
  const config = clients.bob.configs[cid2];
  assert(config?.read_events && config?.delivery_events, `bob's client keeps no config for channel 2 after the event: ${JSON.stringify(config)}`);
});

await check('6b', "bob's connection hears no message.new of channel 2, which it does not watch", async () => {
  await sleep(300);
  const stray = eventsOf(clients.bob, 'message.new', (e) => e.cid === cid2);
  assert(!stray.length, `bob got ${stray.length} message.new for ${cid2} (Stream sends them to watchers only)`);
});

await check('6c', "carol's channel list shows channel 2 with the message (its own notification handling)", async () => {
  await waitFor('channel 2 in carol\'s list with the message', () => {
    const ch = carolManager.state.getLatestValue().channels.find((c) => c.cid === cid2);
    return ch?.initialized && findMessage(ch, m3.id);
  });
  const told = ['notification.added_to_channel', 'notification.message_new', 'message.new']
    .filter((type) => eventsOf(clients.carol, type, (e) => (e.cid ?? e.channel?.cid) === cid2).length);
  const withoutConfig = eventsOf(clients.carol, 'notification.message_new', (e) => e.channel?.cid === cid2 && !e.channel?.config);
  assert(!withoutConfig.length, 'notification.message_new without channel.config');
  const { error } = carolManager.state.getLatestValue();
  assert(!error, `the channel list failed: ${error?.message}`);
  return `carol heard ${told.join(', ')}`;
});

await check('6d', "carol stops watching channel 2; the next message reaches her list as notification.message_new (with config), and the list watches it again", async () => {
  const carol = clients.carol;
  const ch = carol.activeChannels[cid2];
  assert(ch, "carol's client holds no channel 2");
  await ch.stopWatching();
  const sinceAt = Date.now();
  const m = (await clients.alice.activeChannels[cid2].sendMessage({ id: randomUUID(), text: 'While carol looks elsewhere' })).message;
  const fresh = await waitFor("carol's notification.message_new", () =>
    eventsOf(carol, 'notification.message_new', (e) => e.message?.id === m.id)[0]);
  assert(fresh.channel?.config?.read_events, `its channel has no config: ${JSON.stringify(fresh.channel)}`);
  assert(carol.configs[cid2]?.delivery_events, `carol's client lost channel 2's config: ${JSON.stringify(carol.configs[cid2])}`);
  const stray = eventsOf(carol, 'message.new', (e) => e.message?.id === m.id);
  assert(!stray.length, 'she also got message.new for it after stop-watching');
  const rewatch = await waitFor("the list's watch query", () => carol.requests.find((r) =>
    r.at >= sinceAt && r.path === `/channels/messaging/${cid2Id}/query` && r.body?.watch === true));
  assert(rewatch.status < 300, `the watch query answered ${rewatch.status}`);
  await waitFor('the message in carol\'s listed channel 2, first in the list', () => {
    const [top] = carolManager.state.getLatestValue().channels;
    return top?.cid === cid2 && findMessage(top, m.id);
  });
  const m6 = (await clients.alice.activeChannels[cid2].sendMessage({ id: randomUUID(), text: 'And once more' })).message;
  await waitFor('message.new for the next one (watched again)', () => eventsOf(carol, 'message.new', (e) => e.message?.id === m6.id).length);
});

await check('7a', "bob's socket drops; the SDK reconnects and recoverState re-queries the active channels with watch: true", async () => {
  const bob = clients.bob;
  const before = bob.wsConnection.connectionID;
  const sinceAt = Date.now();
  bob.wsConnection.ws.terminate(); // the network goes away: no close frame
  m4 = (await aliceCh.sendMessage({ id: randomUUID(), text: 'Sent while bob was away' })).message;
  await waitFor('connection.recovered on bob', () => eventsOf(bob, 'connection.recovered', (e) => new Date(e.received_at).getTime() >= sinceAt).length, 30000);
  assert(bob.wsConnection.connectionID && bob.wsConnection.connectionID !== before, 'no new connection_id');
  const recover = bob.requests.find((r) => r.at >= sinceAt && r.method === 'POST' && r.path === '/channels');
  assert(recover, 'no POST /channels after the drop');
  const cids = recover.body?.filter_conditions?.cid?.$in ?? [];
  assert(cids.includes(cid1) && recover.body?.watch === true, `recoverState asked ${JSON.stringify(recover.body)}`);
  assert(recover.status === 201 || recover.status === 200, `POST /channels answered ${recover.status}`);
  return `cids [${cids}]`;
});

await check('7b', "the message sent while bob was away is in bob's channel state", async () => {
  assert(findMessage(bobCh, m4.id), "not in bob's state after recoverState");
  const live = eventsOf(clients.bob, 'message.new', (e) => e.message?.id === m4.id).length;
  return live ? 'it also arrived as message.new on the new connection' : 'it came from the recovery query';
});

await check('7c', "the new connection watches channel 1 again: the next message reaches bob as message.new", async () => {
  const m5 = await aliceCh.sendMessage({ id: randomUUID(), text: 'After the reconnect' });
  await waitFor('message.new for it on bob', () => eventsOf(clients.bob, 'message.new', (e) => e.message?.id === m5.message.id).length);
  assert(findMessage(bobCh, m5.message.id), "not in bob's state");
  const notif = eventsOf(clients.bob, 'notification.message_new', (e) => e.message?.id === m5.message.id);
  assert(!notif.length, 'also sent as notification.message_new (channel 1 not watched again?)');
});

await check('7d', "the server restarts gracefully (SIGTERM): every SDK's socket closes 1011 (not 1000, which it takes as final), each comes back (connection.recovered), and bob hears the next message live", async () => {
  const cue = env('TICKS_RESTART_CUE');
  // While the server is down, the SDK's own calls (its delivery reports) are refused at the socket.
  tolerated = /ECONNREFUSED/;
  const sinceAt = Date.now();
  const after = (e) => new Date(e.received_at).getTime() >= sinceAt;
  console.log('RESTART-SERVER'); // the script's cue: SIGTERM, then start it again
  // The close code each SDK's socket saw (its log line "onclose() - onclose callback - CODE"): on
  // 1000 it would take the close as final and come back only after its 35 s connection check; on
  // anything else it reconnects at once. (Its connection.changed offline event waits 5 s by design,
  // and does not come at all if it is back by then, so it is not what is checked.)
  const codes = () => USERS.map((id) => `${id} ${clients[id].closeCodes.filter((c) => c.at >= sinceAt).map((c) => c.code).join(',') || 'none'}`).join('; ');
  await waitFor('a close on every client\'s socket', () =>
    USERS.every((id) => clients[id].closeCodes.some((c) => c.at >= sinceAt)), 15000)
    .catch((error) => { throw new CheckFailure(`${error.message}; close codes: ${codes()}`); });
  const closedAfter = Math.max(...USERS.map((id) => clients[id].closeCodes.find((c) => c.at >= sinceAt).at)) - sinceAt;
  const first = USERS.map((id) => clients[id].closeCodes.find((c) => c.at >= sinceAt).code);
  assert(first.every((code) => code === 1011), `first close codes after the cue: ${codes()}`);
  await waitFor('the server back', () => existsSync(cue), 60000);
  await waitFor('connection.recovered on every client', () =>
    USERS.every((id) => eventsOf(clients[id], 'connection.recovered', after).length), 60000);
  const m7 = await aliceCh.sendMessage({ id: randomUUID(), text: 'After the restart' });
  await waitFor('message.new for it on bob', () => eventsOf(clients.bob, 'message.new', (e) => e.message?.id === m7.message.id).length);
  return `every socket closed 1011 within ${closedAfter} ms of the cue`;
});

await check('8a', 'no SDK error anywhere in the session (uncaught, unhandled, logged, or thrown in event handling)', async () => {
  await sleep(1500); // let the delivery reporter's timers and pending listeners run
  assert(!problems.length, `${problems.length} during the session (listed under the checks above)`);
});

await check('8b', 'every client disconnects cleanly', async () => {
  carolManager?.unregisterSubscriptions(); // the channel list unmounts
  for (const id of USERS) {
    const connection = clients[id]?.wsConnection;
    await clients[id]?.disconnectUser(5000);
    assert(connection && !connection.isHealthy && !connection.ws, `${id}'s socket is still open`);
    assert(!clients[id].userID && !Object.keys(clients[id].activeChannels).length, `${id}'s client still holds its user or channels`);
  }
  await sleep(500);
});

const failed = results.filter((r) => !r.passed).length;
console.log(`${STORE}: ${results.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
