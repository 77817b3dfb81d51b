import Foundation
import TicksProtocol
import Synchronization

/// Counts calls against `RateLimits` with a sliding-window counter: the
/// calls of the current fixed window plus the previous window's, weighted by
/// how much of it the sliding window still covers (Cloudflare's estimate:
/// two integers a key instead of a log of every call).
///
/// Bounded: at most `maxKeys` (identity, endpoint) pairs are tracked; past
/// that, new identities share one counter per endpoint, so a flood of
/// identities is limited together rather than growing the table.
public final class RateLimiter: Sendable {
    /// Who a call counts against.
    public enum Identity: Hashable, Sendable {
        case app
        case user(String)
        /// A delivery-only token of `user` for `channel` (docs/webhooks.md): kept apart from the
        /// user's own budget, so a leaked token cannot use it up.
        case delivery(user: String, channel: String)
        case address(String)
        /// Identities past `maxKeys`.
        case overflow
    }

    /// The answer for one call, and what its response headers say.
    public struct Decision: Sendable, Equatable {
        public var allowed: Bool
        public var limit: Int
        public var remaining: Int
        /// Unix seconds when the current window ends.
        public var reset: Int64
    }

    private struct Key: Hashable {
        let identity: Identity
        let endpoint: String
    }

    private struct Counter {
        var window: Int64
        var current: Int
        var previous: Int
    }

    private struct Shard {
        var counters: [Key: Counter] = [:]
        /// The window of the last sweep for expired counters: one a window at most.
        var sweptWindow: Int64 = .min
    }

    /// One lock of the table (a `Mutex` cannot sit in an array itself).
    private final class LockedShard: Sendable {
        let shard = Mutex(Shard())
    }

    public let limits: RateLimits
    let maxKeys: Int
    private static let shardCount = 16
    private let shards: [LockedShard]

    /// The wall clock the windows are read from (a test's clock in tests).
    private let time: TimeSource

    public init(limits: RateLimits, maxKeys: Int = 100_000, time: TimeSource = .system) {
        self.limits = limits
        self.maxKeys = maxKeys
        self.time = time
        shards = (0..<Self.shardCount).map { _ in LockedShard() }
    }

    private var windowSeconds: Double {
        max(limits.window.inSeconds, 0.001)
    }

    /// Counts a call of `endpoint` by `identity` at `now` (by default the
    /// limiter's clock) if the limit allows it.
    public func check(_ endpoint: APIEndpoint?, by identity: Identity, at now: Date? = nil) -> Decision {
        let now = now ?? time.wallNow.date
        let limit = limitValue(endpoint, identity)
        return update(endpoint, identity, limit: limit, at: now, counting: true)
    }

    /// What `identity` has left of `endpoint`, without counting a call.
    public func peek(_ endpoint: APIEndpoint, by identity: Identity, at now: Date? = nil) -> Decision {
        let now = now ?? time.wallNow.date
        return update(endpoint, identity, limit: limitValue(endpoint, identity), at: now, counting: false)
    }

    private func limitValue(_ endpoint: APIEndpoint?, _ identity: Identity) -> Int {
        let limit = limits.limit(for: endpoint)
        return identity == .app ? limit.serverSide : limit.user
    }

    private func update(_ endpoint: APIEndpoint?, _ identity: Identity, limit: Int, at now: Date, counting: Bool)
        -> Decision
    {
        let seconds = now.timeIntervalSince1970
        let window = Int64((seconds / windowSeconds).rounded(.down))
        let elapsed = seconds / windowSeconds - Double(window)
        let reset = Int64((Double(window + 1) * windowSeconds).rounded(.up))
        var key = Key(identity: identity, endpoint: endpoint?.rawValue ?? "")
        let locked = shards[abs(key.hashValue % Self.shardCount)]
        let perShard = max(maxKeys / Self.shardCount, 1)
        return locked.shard.withLock { shard in
            if shard.counters[key] == nil, counting, shard.counters.count >= perShard {
                if shard.sweptWindow < window {
                    shard.counters = shard.counters.filter { $0.value.window >= window - 1 }
                    shard.sweptWindow = window
                }
                if shard.counters.count >= perShard { key = Key(identity: .overflow, endpoint: key.endpoint) }
            }
            var counter = shard.counters[key] ?? Counter(window: window, current: 0, previous: 0)
            if counter.window != window {
                counter.previous = counter.window == window - 1 ? counter.current : 0
                counter.current = 0
                counter.window = window
            }
            let estimate = Double(counter.previous) * (1 - elapsed) + Double(counter.current)
            let allowed = estimate + 1 <= Double(limit)
            if counting && allowed { counter.current += 1 }
            if counting || shard.counters[key] != nil { shard.counters[key] = counter }
            let used = Int((Double(counter.previous) * (1 - elapsed) + Double(counter.current)).rounded(.up))
            return Decision(allowed: allowed, limit: limit, remaining: max(limit - used, 0), reset: reset)
        }
    }
}

extension RateLimiter.Decision {
    /// Stream's 429 (code 9) for a call this decision refused, over HTTP or on a socket.
    func refusal(of endpoint: APIEndpoint?) -> APIError {
        .rateLimited(
            "too many \(endpoint?.rawValue ?? "unknown") calls: \(limit) a minute are allowed; "
                + "try again after \(reset) (Unix seconds)")
    }
}
