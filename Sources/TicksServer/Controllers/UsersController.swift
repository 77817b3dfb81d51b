import Foundation
import Hummingbird
import TicksProtocol

/// `POST /users` and `GET /users`.
struct UsersController {
    let store: any TicksStore
    static let maxUsersPerCall = 100

    func addRoutes(to group: RouterGroup<TicksRequestContext>) {
        group.post("users", use: upsert)
        group.get("users", use: query)
    }

    struct UpsertRequest: Decodable {
        var users: [String: User]
    }

    struct UsersByID: Encodable {
        var users: [String: User]
    }

    @Sendable func upsert(_ request: Request, context: TicksRequestContext) async throws -> Response {
        var request = request
        let body = try await request.decodeJSON(UpsertRequest.self)
        guard !body.users.isEmpty else { throw APIError.input("users must not be empty") }
        guard body.users.count <= Self.maxUsersPerCall else {
            throw APIError.input("at most \(Self.maxUsersPerCall) users per call")
        }
        for (key, user) in body.users {
            try requireValidID(user.id, "user id")
            guard key == user.id else { throw APIError.input("users.\(key.prefix(64)) has id '\(user.id)'") }
            // A user token may only update its own user.
            _ = try context.actingUser(named: user.id)
        }
        let stored = try await store.upsertUsers(Array(body.users.values), now: .now())
        return try context.respond(UsersByID(users: Dictionary(uniqueKeysWithValues: stored.map { ($0.id, $0) })))
    }

    struct QueryPayload: Decodable {
        var filterConditions: [String: FilterValue]

        enum CodingKeys: String, CodingKey { case filterConditions = "filter_conditions" }
    }

    struct UserList: Encodable {
        var users: [User]
    }

    @Sendable func query(_ request: Request, context: TicksRequestContext) async throws -> Response {
        _ = try context.requirePrincipal()
        guard let payload = request.queryParameter("payload") else {
            throw APIError.input("payload is required: ?payload={\"filter_conditions\": {\"id\": {\"$in\": [...]}}}")
        }
        let query: QueryPayload
        do {
            query = try JSONDecoder().decode(QueryPayload.self, from: Data(String(payload).utf8))
        } catch let error as DecodingError {
            throw APIError.input("payload: \(error.readableDescription)")
        }
        if let unsupported = query.filterConditions.keys.first(where: { $0 != "id" }) {
            throw APIError.input("filtering users on '\(unsupported.prefix(64))' is not supported; filter on id")
        }
        let ids = query.filterConditions["id"]?.values ?? []
        guard ids.count <= 1000 else { throw APIError.input("at most 1000 ids per query") }
        let found = try await store.users(ids: ids)
        return try context.respond(UserList(users: ids.uniqued().compactMap { found[$0] }))
    }
}
