/// Rate limits like Stream's: per endpoint, over a sliding one-minute
/// window, counted per user for user tokens and per app for server tokens
/// (Stream's "server_side" platform, which users' limits never touch); a
/// request without a valid token counts against its client's IP address.
public struct RateLimits: Sendable, Equatable {
    /// Calls one endpoint allows in a window.
    public struct Limit: Sendable, Equatable, CustomStringConvertible {
        /// Per user (user tokens), or per address (no valid token).
        public var user: Int
        /// Per app, for server tokens.
        public var serverSide: Int

        public init(user: Int, serverSide: Int) {
            self.user = user
            self.serverSide = serverSide
        }

        public var description: String { "\(user)/\(serverSide)" }
    }

    /// Off for benchmarks (`ticks serve --rate-limits off`): no counting, no headers.
    public var enabled = true
    public var window: Duration = .seconds(60)
    public var limits: [APIEndpoint: Limit] = RateLimits.defaults
    /// Requests no route matches (answered 404 or 405).
    public var unmatched = Limit(user: 600, serverSide: 10_000)

    public init() {}

    public static let off: RateLimits = {
        var limits = RateLimits()
        limits.enabled = false
        return limits
    }()

    public func limit(for endpoint: APIEndpoint?) -> Limit {
        endpoint.flatMap { limits[$0] } ?? unmatched
    }

    /// Stream's defaults where it has them, raised for the receipt calls a
    /// receipts server exists for (Stream allows one user 60 calls a minute of
    /// any endpoint, which an SDK marking delivered once a second would hit).
    /// Server tokens are the app's own backend: their limits catch runaway
    /// scripts, not load.
    public static let defaults: [APIEndpoint: Limit] = {
        var limits: [APIEndpoint: Limit] = [:]
        for endpoint in APIEndpoint.allCases {
            limits[endpoint] =
                switch endpoint {
                case .markRead, .markDelivered, .markChannelsRead, .markThreadsRead, .markUnread, .markPlayed:
                    Limit(user: 300, serverSide: 60_000)
                case .sendMessage, .sendEvent, .stopWatchingChannel, .getOrCreateChannel, .getOrCreateDistinctChannel, .queryChannels, .getMessage,
                    .getReceipts, .getReplies, .getManyMessages, .updateMessage, .updateMessagePartial, .deleteMessage,
                    .unreadCounts, .queryMembers, .sync:
                    Limit(user: 300, serverSide: 10_000)
                case .updateUsers, .queryUsers, .updateUsersPartial, .unreadCountsBatch, .deleteUser, .deleteUsers:
                    Limit(user: 60, serverSide: 10_000)
                case .updateChannel, .updateChannelPartial, .deleteChannel, .deleteChannels, .truncateChannel,
                    .updateMemberPartial, .getTask, .explainUnread:
                    Limit(user: 60, serverSide: 1_000)
                case .recountUnread:
                    Limit(user: 60, serverSide: 60)
                case .createChannelType, .listChannelTypes, .getChannelType, .updateChannelType, .getApp, .updateApp,
                    .getRateLimits, .listFailedWebhooks, .retryFailedWebhooks, .getStatus:
                    Limit(user: 60, serverSide: 1_000)
                case .connect, .demoToken:
                    Limit(user: 60, serverSide: 60)
                case .health, .ready, .metrics, .openAPI:
                    Limit(user: 6_000, serverSide: 6_000)
                }
        }
        return limits
    }()

    /// Applies `NAME=USER` or `NAME=USER/SERVER` (`--rate-limit`), e.g. `MarkRead=600/100000`.
    public mutating func set(_ specification: String) throws(RateLimitSpecificationError) {
        let parts = specification.split(separator: "=", maxSplits: 1).map(String.init)
        guard parts.count == 2, let endpoint = APIEndpoint(rawValue: parts[0]) else {
            throw RateLimitSpecificationError(specification: specification)
        }
        let numbers = parts[1].split(separator: "/", omittingEmptySubsequences: false).map { Int($0) }
        guard (1...2).contains(numbers.count), numbers.allSatisfy({ ($0 ?? -1) >= 0 }) else {
            throw RateLimitSpecificationError(specification: specification)
        }
        var limit = limits[endpoint] ?? unmatched
        limit.user = numbers[0]!
        if numbers.count == 2 { limit.serverSide = numbers[1]! }
        limits[endpoint] = limit
    }
}

public struct RateLimitSpecificationError: Error, CustomStringConvertible {
    public let specification: String

    public var description: String {
        "'\(specification)' is not NAME=USER_LIMIT[/SERVER_LIMIT] with NAME one of "
            + APIEndpoint.allCases.map(\.rawValue).joined(separator: ", ")
    }
}
