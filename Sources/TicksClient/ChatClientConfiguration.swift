import Foundation
import Logging
import TicksProtocol

/// How long to wait between tries: `initialDelay`, doubling up to `maxDelay`,
/// with up to 20% random jitter so many clients do not retry in step.
public struct Backoff: Sendable, Equatable {
    public var initialDelay: Duration
    public var maxDelay: Duration

    public init(initialDelay: Duration, maxDelay: Duration) {
        self.initialDelay = initialDelay
        self.maxDelay = maxDelay
    }

    /// The delay after the `attempt`-th failure (1-based).
    public func delay(after attempt: Int) -> Duration {
        let doubled = initialDelay * (1 << min(max(attempt - 1, 0), 20))
        let capped = min(doubled, maxDelay)
        return capped * Double.random(in: 0.8...1.0)
    }
}

/// Everything a `ChatClient` can be told.
public struct ChatClientConfiguration: Sendable {
    /// The Ticks server, e.g. `http://127.0.0.1:3030`.
    public var baseURL: URL
    public var apiKey: String
    /// Where unsent messages wait: a file keeps them across restarts.
    public var outbox: OutboxLocation
    /// How long one HTTP call may take.
    public var requestTimeout: Duration = .seconds(10)
    /// How many times a send is tried before the message shows as failed.
    public var sendAttempts: Int = 4
    /// The wait between send attempts.
    public var sendBackoff = Backoff(initialDelay: .milliseconds(500), maxDelay: .seconds(8))
    /// The wait between reconnection attempts.
    public var reconnectBackoff = Backoff(initialDelay: .milliseconds(250), maxDelay: .seconds(10))
    /// How often the client sends Stream's health check; a socket silent for
    /// two periods is dropped and reconnected.
    public var healthCheckInterval: Duration = .seconds(25)
    /// Send read and delivered receipts as frames on the open WebSocket (a
    /// Ticks extension: one frame instead of an HTTP request); HTTP when no
    /// socket is open, and always when false (a server that is not Ticks).
    public var receiptsOnSocket = true
    /// Whether messages from others are marked delivered when they reach this device.
    public var marksDelivered = true
    /// At most one mark-delivered call per this period.
    public var deliveryThrottle: Duration = .seconds(1)
    /// At most this many channels per mark-delivered call (Stream's limit is 100).
    public var deliveryBatchSize = 100
    /// How many of a user's most recent channels are checked for undelivered
    /// messages after each connect.
    public var deliveryCatchUpChannels = 30
    /// When a group message counts as delivered or read.
    public var groupPolicy: GroupPolicy = .anyMember
    /// How many of the newest messages a channel loads.
    public var messagePageSize = 50
    /// Whether failed messages go back to pending and are sent again after each
    /// reconnect (Stream leaves them failed until the user resends).
    public var resendsFailedOnReconnect = false
    /// Channels per page of a channel list (at most 30, the server's limit).
    public var channelListPageSize = 20
    /// Newest messages loaded with each channel of a list page.
    public var channelListMessageLimit = 10
    /// What the device cache keeps (in the outbox's database).
    public var cacheLimits = CacheLimits()
    /// How long after a change the cache is written (changes in between are written together).
    public var cacheWriteDelay: Duration = .milliseconds(250)
    /// How far before the last change seen a sync starts, for clocks of
    /// several server nodes and events that were on their way.
    public var syncOverlap: Duration = .seconds(5)
    /// The clock every wait of the client runs on: the delivery and read
    /// throttles, the send and reconnect backoffs, the health check, the
    /// cache's write delay and reloads. Tests give a clock they advance.
    public var clock: any Clock<Duration> = ContinuousClock()
    public var logger = Logger(label: "ticks.client")

    public init(baseURL: URL, apiKey: String, outbox: OutboxLocation = .inMemory) {
        self.baseURL = baseURL
        self.apiKey = apiKey
        self.outbox = outbox
    }
}
