import HTTPTypes
import Hummingbird

/// Every endpoint Ticks serves, by the name Stream gives it. The one list of
/// routes: controllers register through it, rate limits are set and reported
/// by these names, and they are the operationIds of the OpenAPI document.
public enum APIEndpoint: String, CaseIterable, Sendable {
    case health = "Health"
    case ready = "Ready"
    case metrics = "Metrics"
    case openAPI = "OpenAPI"
    case getApp = "GetApp"
    case updateApp = "UpdateApp"
    case getRateLimits = "GetRateLimits"
    case updateUsers = "UpdateUsers"
    case updateUsersPartial = "UpdateUsersPartial"
    case deleteUser = "DeleteUser"
    case deleteUsers = "DeleteUsers"
    case queryUsers = "QueryUsers"
    case createChannelType = "CreateChannelType"
    case listChannelTypes = "ListChannelTypes"
    case getChannelType = "GetChannelType"
    case updateChannelType = "UpdateChannelType"
    case queryChannels = "QueryChannels"
    case markChannelsRead = "MarkChannelsRead"
    case markThreadsRead = "MarkThreadsRead"
    case markDelivered = "MarkDelivered"
    case getOrCreateChannel = "GetOrCreateChannel"
    case getOrCreateDistinctChannel = "GetOrCreateDistinctChannel"
    case updateChannel = "UpdateChannel"
    case updateChannelPartial = "UpdateChannelPartial"
    case deleteChannel = "DeleteChannel"
    case deleteChannels = "DeleteChannels"
    case truncateChannel = "TruncateChannel"
    case getTask = "GetTask"
    case queryMembers = "QueryMembers"
    case updateMemberPartial = "UpdateMemberPartial"
    case getManyMessages = "GetManyMessages"
    case updateMessage = "UpdateMessage"
    case updateMessagePartial = "UpdateMessagePartial"
    case deleteMessage = "DeleteMessage"
    case unreadCounts = "UnreadCounts"
    case unreadCountsBatch = "UnreadCountsBatch"
    case explainUnread = "ExplainUnread"
    case recountUnread = "RecountUnread"
    case sendMessage = "SendMessage"
    case markRead = "MarkRead"
    case markUnread = "MarkUnread"
    case sendEvent = "SendEvent"
    case stopWatchingChannel = "StopWatchingChannel"
    case getMessage = "GetMessage"
    case getReceipts = "GetReceipts"
    case markPlayed = "MarkPlayed"
    case getReplies = "GetReplies"
    case sync = "Sync"
    case listFailedWebhooks = "ListFailedWebhooks"
    case retryFailedWebhooks = "RetryFailedWebhooks"
    case getStatus = "GetStatus"
    case connect = "Connect"
    case demoToken = "DemoToken"

    public var method: HTTPRequest.Method {
        switch self {
        case .health, .ready, .metrics, .openAPI, .getApp, .getRateLimits, .queryUsers, .listChannelTypes, .getChannelType,
            .getMessage, .getReceipts, .getReplies, .connect, .getTask, .queryMembers, .getManyMessages, .unreadCounts,
            .explainUnread, .listFailedWebhooks, .getStatus:
            .get
        case .updateChannelType, .updateMessagePartial: .put
        case .updateUsersPartial, .updateChannelPartial, .updateMemberPartial, .updateApp: .patch
        case .deleteChannel, .deleteMessage, .deleteUser: .delete
        default: .post
        }
    }

    /// The path as the router reports a matched route (`/channels/{type}/{id}/read`).
    public var path: String {
        switch self {
        case .health: "/health"
        case .ready: "/ready"
        case .metrics: "/metrics"
        case .openAPI: "/openapi.json"
        case .getApp, .updateApp: "/app"
        case .getRateLimits: "/rate_limits"
        case .updateUsers, .queryUsers, .updateUsersPartial: "/users"
        case .deleteUser: "/users/{user_id}"
        case .deleteUsers: "/users/delete"
        case .createChannelType, .listChannelTypes: "/channeltypes"
        case .getChannelType, .updateChannelType: "/channeltypes/{name}"
        case .queryChannels: "/channels"
        case .markChannelsRead: "/channels/read"
        case .markThreadsRead: "/threads/read"
        case .markDelivered: "/channels/delivered"
        case .getOrCreateChannel: "/channels/{type}/{id}/query"
        case .getOrCreateDistinctChannel: "/channels/{type}/query"
        case .updateChannel, .updateChannelPartial, .deleteChannel: "/channels/{type}/{id}"
        case .deleteChannels: "/channels/delete"
        case .truncateChannel: "/channels/{type}/{id}/truncate"
        case .getTask: "/tasks/{id}"
        case .queryMembers: "/members"
        case .updateMemberPartial: "/channels/{type}/{id}/member/{user_id}"
        case .getManyMessages: "/channels/{type}/{id}/messages"
        case .unreadCounts: "/unread"
        case .unreadCountsBatch: "/unread_batch"
        case .explainUnread: "/unread/explain"
        case .recountUnread: "/unread/recount"
        case .sendMessage: "/channels/{type}/{id}/message"
        case .markRead: "/channels/{type}/{id}/read"
        case .markUnread: "/channels/{type}/{id}/unread"
        case .sendEvent: "/channels/{type}/{id}/event"
        case .stopWatchingChannel: "/channels/{type}/{id}/stop-watching"
        case .getMessage, .updateMessage, .updateMessagePartial, .deleteMessage: "/messages/{id}"
        case .getReceipts: "/messages/{id}/receipts"
        case .markPlayed: "/messages/{id}/played"
        case .getReplies: "/messages/{id}/replies"
        case .sync: "/sync"
        case .listFailedWebhooks: "/webhooks/failed"
        case .retryFailedWebhooks: "/webhooks/failed/retry"
        case .getStatus: "/admin/status"
        case .connect: "/connect"
        case .demoToken: "/demo/token"
        }
    }

    /// The path in Stream's API v2 (the `getstream` SDKs), where Ticks
    /// serves the endpoint in v2's shapes (`APIVersion`); nil where it does
    /// not. The same handler answers both paths.
    public var v2Path: String? {
        switch self {
        case .getApp, .updateApp: "/api/v2/app"
        case .getRateLimits: "/api/v2/rate_limits"
        case .updateUsers, .queryUsers, .updateUsersPartial: "/api/v2/users"
        case .deleteUsers: "/api/v2/users/delete"
        case .queryChannels: "/api/v2/chat/channels"
        case .markChannelsRead: "/api/v2/chat/channels/read"
        case .markDelivered: "/api/v2/chat/channels/delivered"
        case .getOrCreateChannel: "/api/v2/chat/channels/{type}/{id}/query"
        case .getOrCreateDistinctChannel: "/api/v2/chat/channels/{type}/query"
        case .sendMessage: "/api/v2/chat/channels/{type}/{id}/message"
        case .markRead: "/api/v2/chat/channels/{type}/{id}/read"
        case .markUnread: "/api/v2/chat/channels/{type}/{id}/unread"
        case .sendEvent: "/api/v2/chat/channels/{type}/{id}/event"
        case .stopWatchingChannel: "/api/v2/chat/channels/{type}/{id}/stop-watching"
        case .getMessage: "/api/v2/chat/messages/{id}"
        case .unreadCounts: "/api/v2/chat/unread"
        case .unreadCountsBatch: "/api/v2/chat/unread_batch"
        case .createChannelType, .listChannelTypes: "/api/v2/chat/channeltypes"
        case .getChannelType, .updateChannelType: "/api/v2/chat/channeltypes/{name}"
        case .updateChannel, .updateChannelPartial, .deleteChannel: "/api/v2/chat/channels/{type}/{id}"
        case .deleteChannels: "/api/v2/chat/channels/delete"
        case .truncateChannel: "/api/v2/chat/channels/{type}/{id}/truncate"
        case .getTask: "/api/v2/tasks/{id}"
        case .queryMembers: "/api/v2/chat/members"
        // v2 names the member in the query: `?user_id=`.
        case .updateMemberPartial: "/api/v2/chat/channels/{type}/{id}/member"
        case .getManyMessages: "/api/v2/chat/channels/{type}/{id}/messages"
        case .updateMessage, .updateMessagePartial, .deleteMessage: "/api/v2/chat/messages/{id}"
        case .getReplies: "/api/v2/chat/messages/{id}/replies"
        default: nil
        }
    }

    /// Every path the endpoint is served at: v1's, then v2's.
    public var paths: [String] { [path] + (v2Path.map { [$0] } ?? []) }

    /// Whether the endpoint needs `api_key` and a token (checked by `AuthMiddleware`,
    /// or by the WebSocket handler for `Connect`).
    public var isAuthenticated: Bool {
        switch self {
        case .health, .ready, .metrics, .openAPI, .demoToken: false
        default: true
        }
    }

    private static let byRoute: [String: APIEndpoint] = Dictionary(
        uniqueKeysWithValues: allCases.flatMap { endpoint in
            endpoint.paths.map { ("\(endpoint.method.rawValue) \($0)", endpoint) }
        })

    /// The endpoint of a route the router matched.
    static func matching(method: HTTPRequest.Method, path: String?) -> APIEndpoint? {
        guard let path else { return nil }
        return byRoute["\(method.rawValue) \(path)"]
    }

    /// The methods `endpoints` serve at a concrete request path (for a 405's
    /// `Allow`), each once; empty when none is. As the router does, a fixed
    /// segment wins over a parameter: `/channels/messaging/query` is the
    /// distinct-channel route's path, not a channel named `query`.
    static func methods(servingPath requestPath: String, among endpoints: Set<APIEndpoint>) -> [HTTPRequest.Method] {
        let parts = requestPath.split(separator: "/", omittingEmptySubsequences: true)
        let matching = allCases.filter(endpoints.contains).flatMap { endpoint in
            endpoint.paths.compactMap { path -> (method: HTTPRequest.Method, fixed: Int)? in
                let pattern = path.split(separator: "/", omittingEmptySubsequences: true)
                guard pattern.count == parts.count, zip(pattern, parts).allSatisfy({ $0.first == "{" || $0 == $1 })
                else { return nil }
                return (endpoint.method, pattern.filter { $0.first != "{" }.count)
            }
        }
        let mostFixed = matching.map(\.fixed).max() ?? 0
        var methods: [HTTPRequest.Method] = []
        for route in matching where route.fixed == mostFixed && !methods.contains(route.method) {
            methods.append(route.method)
        }
        return methods
    }

    /// The routes in the router's syntax (`channels/:type/:id/read`), one per path.
    var routerPaths: [RouterPath] {
        paths.map { path in
            RouterPath(
                stringLiteral: path.split(separator: "/").map { part in
                    part.first == "{" ? ":" + part.dropFirst().dropLast() : part
                }.joined(separator: "/"))
        }
    }
}

extension RouterMethods {
    /// Registers `handler` for `endpoint`'s method, at each of its paths.
    @discardableResult
    func on(
        _ endpoint: APIEndpoint,
        use handler: @Sendable @escaping (Request, Context) async throws -> some ResponseGenerator
    ) -> Self {
        for path in endpoint.routerPaths { on(path, method: endpoint.method, use: handler) }
        return self
    }
}
