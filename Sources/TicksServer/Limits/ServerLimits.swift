/// The bounds that keep one client, careless or hostile, from exhausting the
/// server: every queue, cache and list a client can grow has one, in bytes or
/// entries. The README's "Limits" table lists each with its flag; `GET /app`
/// reports them.
public struct ServerLimits: Sendable, Equatable {
    /// Custom data of one user (name, image and custom fields), one message or
    /// one channel, as JSON (Stream allows 5 KB).
    public var maxCustomDataBytes = 5 * 1024
    /// Members of one channel: every member's devices hear of its messages.
    public var maxChannelMembers = 100_000
    /// Values of one `$in` filter.
    public var maxFilterValues = 1000
    /// WebSocket connections one user may hold at once (Stream's production cap).
    public var maxConnectionsPerUser = 50
    /// Bytes that may wait for one WebSocket before it is closed as too slow.
    public var connectionBufferBytes = 4 << 20
    /// The largest WebSocket frame a client may send.
    public var maxInboundFrameBytes = 64 * 1024
    /// An HTTP connection with no request for this long is closed.
    public var idleTimeout: Duration = .seconds(60)
    /// A new connection that has not sent a whole request in this time is closed.
    public var headerTimeout: Duration = .seconds(10)
    /// What the decoded-JSON and verified-token caches may hold, together.
    public var cacheBytes = 64 << 20
    /// Events a PostgreSQL node may queue for the other nodes while publishing lags.
    public var busQueueBytes = 64 << 20
    /// Events `POST /sync` tells of one channel; a channel that missed more must be reloaded.
    public var syncEventsPerChannel = 500
    /// Events in one `POST /sync` answer; the channels past it are left for another call.
    public var syncEventsPerAnswer = 2_000

    /// The largest request body (Stream's limit; not configurable).
    public static let maxBodyBytes = 1 << 20
    /// Members added or removed in one call, or given when creating a channel.
    public static let maxMembersPerCall = 100
    /// The largest `offset` of a page of channels or members (Stream's limit, 10,000).
    public static let maxOffset = 10_000
    /// Channels one user's WebSocket connections on one node may watch at once, all
    /// together (`watch: true`): a bound per user, not per connection, so that the
    /// memory a user's watches hold does not grow with their connections.
    public static let maxWatchedChannelsPerUser = 10_000

    public init() {}
}
