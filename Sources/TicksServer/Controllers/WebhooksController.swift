import Foundation
import Hummingbird
import TicksProtocol

/// The webhook calls that gave up (docs/webhooks.md, "Failed calls"): listed,
/// and tried again on request. Server tokens only: they hold the app's events.
struct WebhooksController {
    let outbox: any WebhookOutbox

    func addRoutes(to group: RouterGroup<TicksRequestContext>) {
        group.on(.listFailedWebhooks, use: failed)
        group.on(.retryFailedWebhooks, use: retry)
    }

    static let maxPage = 100

    struct FailedCall: Encodable {
        var id: Int64
        var deliveryID: String
        var hook: String
        var url: String
        var eventType: String
        var cid: String?
        var attempts: Int
        var lastError: String?
        var createdAt: Timestamp
        var failedAt: Timestamp?
        /// The event as it was written (JSON text).
        var payload: String

        enum CodingKeys: String, CodingKey {
            case id, hook, url, cid, attempts, payload
            case deliveryID = "delivery_id"
            case eventType = "event_type"
            case lastError = "last_error"
            case createdAt = "created_at"
            case failedAt = "failed_at"
        }

        init(_ call: OutboxCall) {
            id = call.id
            deliveryID = call.deliveryID
            hook = call.kind
            // Named without credentials, a row written before 0.10 too (the sender renames those).
            url = ReceiverURL(call.target).name
            eventType = call.eventType
            cid = call.cid.isEmpty ? nil : call.cid
            attempts = call.attempts
            lastError = call.lastError
            createdAt = call.createdAt
            failedAt = call.deadAt
            payload = call.payload
        }
    }

    struct FailedResponse: Encodable {
        var calls: [FailedCall]
        /// Pass as `after` for the next page; absent on the last.
        var next: Int64?
    }

    func requireServer(_ context: TicksRequestContext) throws {
        guard case .server = try context.requirePrincipal() else {
            throw APIError.forbidden("failed webhook calls need a server token")
        }
    }

    /// `GET /webhooks/failed?after=ID&limit=N`: dead calls, oldest first.
    @Sendable func failed(_ request: Request, context: TicksRequestContext) async throws -> Response {
        try requireServer(context)
        let after = try integerParameter(request.queryParameter("after"), "after", range: 0...Int64.max) ?? 0
        let limit =
            try integerParameter(request.queryParameter("limit"), "limit", range: 1...Int64(Self.maxPage))
            .map(Int.init) ?? Self.maxPage
        let calls = try await outbox.deadCalls(after: after, limit: limit + 1)
        let page = calls.prefix(limit)
        return try context.respond(
            FailedResponse(calls: page.map(FailedCall.init), next: calls.count > limit ? page.last?.id : nil))
    }

    struct RetryRequest: Decodable {
        /// The delivery ids to try again; every failed call when absent.
        var deliveryIDs: [String]?

        enum CodingKeys: String, CodingKey {
            case deliveryIDs = "delivery_ids"
        }
    }

    struct RetryResponse: Encodable {
        var retried: [String]
    }

    /// `POST /webhooks/failed/retry` `{"delivery_ids": [...]}` (or `{}` for all):
    /// the calls wait again, their attempts counted from zero.
    @Sendable func retry(_ request: Request, context: TicksRequestContext) async throws -> Response {
        try requireServer(context)
        var request = request
        let body = try await request.decodeJSON(RetryRequest.self)
        if let ids = body.deliveryIDs {
            guard ids.count <= 1_000 else { throw APIError.input("delivery_ids: at most 1,000 at a time") }
            try ids.forEach { try requireID($0, Identifier.deliveryID, "delivery_ids: delivery id") }
        }
        let retried = try await outbox.retryDeadCalls(body.deliveryIDs, now: .now())
        return try context.respond(RetryResponse(retried: retried))
    }
}
