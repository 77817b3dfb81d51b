import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import ServiceLifecycle
import Synchronization
import TicksProtocol

/// Sends the webhook outbox's calls (docs/webhooks.md): one node at a time
/// (the one holding `webhook_lease`), each receiver-and-channel queue in
/// order, at most `concurrency` queues at once, each call signed and timed
/// out, retried with exponential backoff, dead after `maxAttempts`. Nothing
/// here runs inside a request: a slow or dead receiver holds only its own
/// queues, never a receipt.
final class WebhookSender: Service, Sendable {
    let store: any WebhookOutbox
    let settings: WebhookSettings
    let authority: TokenAuthority
    let metrics: ServerMetrics
    let logger: Logger
    /// This node's name in the lease. SQLite is one server's database, so
    /// its name is fixed: a server restarted after a crash takes the lease
    /// back at once instead of waiting for the dead one's to run out.
    let node: String
    /// How often the sender looks at the outbox when nothing woke it
    /// (other nodes' changes, calls whose retry time came).
    let pollInterval: Duration
    let leaseDuration: Duration = .seconds(15)
    /// The clock of the retry times, pauses, lease, poll interval and call
    /// timeout (a test's clock in tests). The cap of 20 looks a second is on
    /// the real clock: it bounds CPU, not a wait anyone sees.
    let time: TimeSource

    private let http: HTTPClient
    private let woken = Atomic<Bool>(false)
    /// Until when this node may send (microseconds): the lease it last took.
    private let leaseUntil = Atomic<Int64>(0)
    private let state = Mutex(State())

    /// Whether this node holds the lease now: it is the one sending.
    var isSending: Bool { time.wallNow.microseconds < leaseUntil.load(ordering: .relaxed) }

    private struct QueueKey: Hashable {
        var target: String
        var cid: String
    }

    private struct State {
        /// Queues being sent now.
        var busy = Set<QueueKey>()
        /// Queues whose first call waits for its retry time.
        var notBefore: [QueueKey: Timestamp] = [:]
        /// Receivers that could not be reached: none of their queues is tried before then.
        var paused: [String: Timestamp] = [:]
        /// Receivers not reached at their last attempt: one queue at a time
        /// tries them (a probe), so only its first call counts attempts,
        /// until a call is delivered.
        var suspect = Set<String>()

        /// How many more of `target`'s queues may start now.
        mutating func room(for target: String, at now: Timestamp, concurrency: Int) -> Int {
            if let until = paused[target], now < until { return 0 }
            paused[target] = nil
            guard !suspect.contains(target) else { return busy.contains { $0.target == target } ? 0 : 1 }
            return concurrency - busy.count
        }
    }

    init(
        store: any WebhookOutbox, kind: StoreKind, settings: WebhookSettings, authority: TokenAuthority, metrics: ServerMetrics, logger: Logger,
        pollInterval: Duration = .seconds(1), time: TimeSource = .system
    ) {
        self.store = store
        self.settings = settings
        self.authority = authority
        self.metrics = metrics
        self.logger = logger
        self.pollInterval = pollInterval
        self.time = time
        node = kind == .sqlite ? "sqlite" : UUID().uuidString.lowercased()
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.timeout = .init(connect: TimeAmount(settings.callTimeout))
        http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// There is work (a change just committed calls): look now rather than at the next poll.
    func wake() {
        woken.store(true, ordering: .relaxed)
    }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                var lastTrim: Duration?
                var namesAdopted = false
                while !Task.isCancelled {
                    let started = ContinuousClock.now
                    // The next look is due a poll interval after this one began: time that
                    // passes while it works counts (on a test's clock, an advance made meanwhile).
                    let nextPoll = self.time.now + self.pollInterval
                    do {
                        if try await self.holdLease() {
                            if !namesAdopted {
                                try await self.adoptReceiverNames()
                                namesAdopted = true
                            }
                            let now = self.time.now
                            if lastTrim.map({ now - $0 > .seconds(10) }) ?? true {
                                try await self.store.trimOutbox(
                                    self.settings.bounds, targets: self.settings.targets, now: self.time.wallNow)
                                self.forgetPastWaits(now: self.time.wallNow)
                                lastTrim = now
                            }
                            for key in try await self.queuesToStart() {
                                group.addTask { await self.drain(key) }
                            }
                        }
                    } catch {
                        self.logger.warning("webhook sender: \(error)")
                    }
                    // However often changes wake it, the outbox is looked at most 20 times a second.
                    try? await Task.sleep(until: started + .milliseconds(50))
                    await self.sleepUntilWoken(orUntil: nextPoll)
                }
            }
        }
        try? await store.releaseWebhookLease(node: node)
        try? await http.shutdown()
    }

    /// Rows written before receivers were named without their credentials
    /// (0.9 and earlier kept the whole URL) are renamed, so that no
    /// `user:password@` or query stays in the database, and so in a backup.
    /// Each rename is one statement, the same whichever node makes it.
    func adoptReceiverNames() async throws {
        for target in try await store.outboxTargets() {
            let name = ReceiverURL(target.target).name
            if name != target.target { try await store.renameOutboxTarget(from: target.target, to: name) }
        }
    }

    /// Takes or renews the lease; false while another node sends. Renewed
    /// at most once a second (each renewal is a write, and changes wake the
    /// sender up to 20 times a second).
    private func holdLease() async throws -> Bool {
        let now = time.wallNow
        let held = leaseUntil.load(ordering: .relaxed)
        if held - now.microseconds > (leaseDuration - .seconds(1)).wholeMicroseconds { return true }
        let until = now + leaseDuration
        guard try await store.takeWebhookLease(node: node, now: now, until: until) else {
            leaseUntil.store(0, ordering: .relaxed)
            return false
        }
        leaseUntil.store(until.microseconds, ordering: .relaxed)
        return true
    }

    /// Retry times and pauses that have passed are forgotten, so what the
    /// sender remembers is bounded by the queues waiting now, not by every
    /// channel that ever had a failed call.
    private func forgetPastWaits(now: Timestamp) {
        state.withLock { state in
            state.notBefore = state.notBefore.filter { now < $0.value }
            state.paused = state.paused.filter { now < $0.value }
        }
    }

    /// Waits for `wake()` or the clock to read `deadline`.
    private func sleepUntilWoken(orUntil deadline: Duration) async {
        while time.now < deadline, !Task.isCancelled {
            if woken.exchange(false, ordering: .relaxed) { return }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Queues with calls that are not being sent, not waiting for a retry,
    /// of receivers not paused, within the concurrency. Only the receivers
    /// configured now are sent to: calls left for a receiver no longer
    /// configured wait until they are too old, then are dead.
    private func queuesToStart() async throws -> [QueueKey] {
        var started: [QueueKey] = []
        for target in settings.targets {
            let now = time.wallNow
            let room = state.withLock { $0.room(for: target, at: now, concurrency: settings.concurrency) }
            guard room > 0 else { continue }
            let queues = try await store.outboxQueues(of: target, limit: room + 64)
            started += state.withLock { state in
                var keys: [QueueKey] = []
                for cid in queues {
                    guard keys.count < room, state.busy.count < settings.concurrency else { break }
                    let key = QueueKey(target: target, cid: cid)
                    if let time = state.notBefore[key], now < time { continue }
                    state.notBefore[key] = nil
                    if state.busy.insert(key).inserted { keys.append(key) }
                }
                return keys
            }
        }
        return started
    }

    /// Sends one queue's calls in order until it is empty, one waits for its
    /// retry, or the lease is gone. Delivered calls leave the outbox a batch
    /// at a time (a crash before that sends them again: at least once).
    private func drain(_ key: QueueKey) async {
        var retryAt: Timestamp?
        var unreachable = false
        var reached = false
        defer {
            state.withLock {
                $0.busy.remove(key)
                if reached { $0.suspect.remove(key.target) }
                if let retryAt {
                    $0.notBefore[key] = retryAt
                    if unreachable {
                        $0.paused[key.target] = retryAt
                        $0.suspect.insert(key.target)
                    }
                }
            }
            wake()
        }
        var delivered: [Int64] = []
        do {
            while !Task.isCancelled {
                let calls = try await store.outboxQueue(target: key.target, cid: key.cid, limit: 32)
                guard !calls.isEmpty else { return }
                for call in calls {
                    let now = time.wallNow
                    guard now.microseconds < leaseUntil.load(ordering: .relaxed) else { break }
                    if now < call.nextAttemptAt {
                        retryAt = call.nextAttemptAt
                        break
                    }
                    guard let failure = await send(call) else {
                        reached = true
                        delivered.append(call.id)
                        metrics.webhookCalls(call.kind, "delivered").increment()
                        continue
                    }
                    let attempts = call.attempts + 1
                    let dead = attempts >= settings.maxAttempts
                    // The backoff runs from the failure: a call that timed out waits it whole,
                    // not the backoff less the timeout (with the defaults, no wait at all).
                    let failedAt = time.wallNow
                    let next = failedAt + backoff(after: attempts)
                    if failure.unreachable {
                        // Paused from the moment it is known, not once the failure is written: no
                        // other queue of the receiver starts meanwhile (a change that wakes the sender).
                        state.withLock {
                            $0.paused[key.target] = next
                            $0.suspect.insert(key.target)
                        }
                    }
                    try await store.failed(
                        call, attempts: attempts, nextAt: next, deadAt: dead ? failedAt : nil, error: failure.reason)
                    metrics.webhookCalls(call.kind, dead ? "dead" : "failed").increment()
                    logger.notice(
                        "webhook call failed",
                        metadata: [
                            "delivery_id": "\(call.deliveryID)", "target": "\(ReceiverURL(call.target).redacted)", "attempt": "\(attempts)",
                            "error": "\(failure.reason)", "dead": "\(dead)",
                        ])
                    if failure.unreachable {
                        unreachable = true
                        retryAt = next
                        break
                    }
                    guard dead else {
                        retryAt = next
                        break
                    }
                }
                try await store.delivered(delivered)
                delivered = []
                if retryAt != nil || time.wallNow.microseconds >= leaseUntil.load(ordering: .relaxed) { return }
            }
        } catch {
            logger.warning("webhook sender: queue \(ReceiverURL(key.target).redacted) \(key.cid): \(error)")
            retryAt = time.wallNow + pollInterval
        }
    }

    /// The wait before attempt `attempts + 1`: the first backoff, doubled each time, at most the largest.
    func backoff(after attempts: Int) -> Duration {
        var wait = settings.firstBackoff
        for _ in 1..<max(attempts, 1) where wait < settings.maxBackoff { wait *= 2 }
        return min(wait, settings.maxBackoff)
    }

    /// Why an attempt failed, and whether the receiver could not be reached at all.
    struct Failure {
        var reason: String
        var unreachable: Bool
    }

    /// One attempt; nil when the receiver answered 2xx.
    private func send(_ call: OutboxCall) async -> Failure? {
        let started = ContinuousClock.now
        defer { metrics.webhookDuration(call.kind).recordInterval(since: started) }
        let body: Data
        do {
            body = try await self.body(of: call)
        } catch {
            return Failure(reason: "the call could not be made: \(error)", unreachable: false)
        }
        guard let url = settings.url(ofReceiver: call.target) else {
            return Failure(reason: "no receiver named \(call.target) is configured", unreachable: false)
        }
        do {
            let receiver = ReceiverURL(url.absoluteString)
            var request = HTTPClientRequest(url: receiver.requestURL)
            request.method = .POST
            if let authorization = receiver.authorization { request.headers.add(name: "Authorization", value: authorization) }
            request.headers.add(name: "Content-Type", value: "application/json")
            request.headers.add(name: "User-Agent", value: "ticks-webhooks")
            request.headers.add(
                name: "X-Signature", value: Self.signature(of: body, secret: authority.credentials.apiSecret))
            request.headers.add(name: "X-Webhook-Id", value: call.deliveryID)
            request.headers.add(name: "X-Webhook-Attempt", value: String(call.attempts + 1))
            request.headers.add(name: "X-Api-Key", value: authority.credentials.apiKey)
            request.body = .bytes(ByteBuffer(data: body))
            // The whole attempt, the answer's body included, within the timeout: the
            // client's deadline ends with the answer's head, so the rest races a clock.
            let status = try await withThrowingTaskGroup(of: UInt.self) { [request] group in
                group.addTask {
                    let response = try await self.http.execute(request, timeout: TimeAmount(self.settings.callTimeout))
                    // What the receiver says is read (so the connection can be reused) but not kept.
                    _ = try await response.body.collect(upTo: 64 << 10)
                    return response.status.code
                }
                group.addTask {
                    try await self.time.sleep(for: self.settings.callTimeout)
                    throw HTTPClientError.deadlineExceeded
                }
                defer { group.cancelAll() }
                return try await group.next()!
            }
            guard (200..<300).contains(status) else {
                return Failure(reason: "HTTP \(status)", unreachable: false)
            }
            return nil
        } catch let error as HTTPClientError where error == .deadlineExceeded {
            return Failure(reason: "no answer within \(settings.callTimeout)", unreachable: true)
        } catch {
            // Refused, reset, name or TLS failure: the receiver is not there.
            return Failure(reason: "\(error)", unreachable: true)
        }
    }

    /// The body of a call: the event; for the push hook with its recipients,
    /// each with a delivery-only token for the channel (minted now, so a
    /// retried call carries fresh ones).
    func body(of call: OutboxCall) async throws -> Data {
        guard call.kind == OutboxEntry.Kind.push.rawValue, let recipients = call.recipients,
            let channel = ChannelID(cid: call.cid)
        else { return Data(call.payload.utf8) }
        let named = try JSONDecoder().decode([PushRecipient].self, from: Data(recipients.utf8))
        var withTokens: [PushCallRecipient] = []
        for recipient in named {
            let token = try await authority.deliveryToken(
                for: recipient.user_id, in: channel, expiresIn: settings.deliveryTokenLifetime)
            withTokens.append(PushCallRecipient(recipient: recipient, delivery_token: token))
        }
        var text = call.payload
        guard text.last == "}" else { throw WebhookSenderError.badPayload(call.deliveryID) }
        text.removeLast()
        text += #","recipients":"# + (try JSONCoding.string(withTokens)) + "}"
        return Data(text.utf8)
    }

    /// Stream's `X-Signature`: HMAC-SHA256 of the body with the app secret, in lowercase hex.
    static func signature(of body: Data, secret: String) -> String {
        let code = HMAC<SHA256>.authenticationCode(for: body, using: SymmetricKey(data: Data(secret.utf8)))
        // By hand: `String(format:)` per byte was 3% of the server's CPU while it sent calls.
        let digits = Array("0123456789abcdef".utf8)
        var hex: [UInt8] = []
        hex.reserveCapacity(64)
        for byte in code {
            hex.append(digits[Int(byte >> 4)])
            hex.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: hex, as: UTF8.self)
    }
}

/// A push call's recipient: who, their counts, and the token that may mark the message delivered.
struct PushCallRecipient: Encodable {
    var recipient: PushRecipient
    var delivery_token: String

    enum CodingKeys: String, CodingKey { case user_id, unread_count, total_unread_count, delivery_token }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(recipient.user_id, forKey: .user_id)
        try container.encode(recipient.unread_count, forKey: .unread_count)
        try container.encode(recipient.total_unread_count, forKey: .total_unread_count)
        try container.encode(delivery_token, forKey: .delivery_token)
    }
}

enum WebhookSenderError: Error {
    case badPayload(String)
}
