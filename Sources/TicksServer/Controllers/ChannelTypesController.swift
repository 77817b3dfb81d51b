import Hummingbird
import TicksProtocol

/// `/channeltypes`: named channel configurations (server tokens only change them).
struct ChannelTypesController {
    let store: any TicksStore

    func addRoutes(to group: RouterGroup<TicksRequestContext>) {
        group.on(.createChannelType, use: create)
        group.on(.listChannelTypes, use: list)
        group.on(.getChannelType, use: get)
        group.on(.updateChannelType, use: update)
    }

    struct CreateRequest: Decodable {
        var name: String
    }

    @Sendable func create(_ request: Request, context: TicksRequestContext) async throws -> Response {
        try requireServer(context)
        var request = request
        let named = try await request.decodeJSON(CreateRequest.self)
        let patch = try await request.decodeJSON(ChannelTypePatch.self)
        try requireID(named.name, Identifier.channelTypeName, "channel type name")
        try validate(patch)
        let now = Timestamp.now()
        // Stream's defaults for a new type: read events on, delivery events off.
        var config = ChannelConfig(name: named.name, readEvents: true, deliveryEvents: false, createdAt: now, updatedAt: now)
        patch.apply(to: &config)
        let created = try await store.createChannelType(config)
        // v2's CreateChannelTypeResponse has the commands as names, as an update's answer; v1's as objects.
        guard context.apiVersion == .v1 else {
            return try context.respond(try Self.withCommandNames(created, in: context.apiVersion), status: .created)
        }
        return try context.respond(created, status: .created)
    }

    struct TypeList: Encodable {
        var channelTypes: [String: ChannelConfig]
        enum CodingKeys: String, CodingKey { case channelTypes = "channel_types" }
    }

    @Sendable func list(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let types = try await store.channelTypes()
        return try context.respond(TypeList(channelTypes: Dictionary(uniqueKeysWithValues: types.map { ($0.name, $0) })))
    }

    @Sendable func get(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let name = try requireID(try context.pathParameter("name"), Identifier.channelTypeName, "channel type name")
        guard let config = try await store.channelType(named: name) else {
            throw APIError.notFound("channel type '\(name.prefix(64))' does not exist")
        }
        return try context.respond(config)
    }

    @Sendable func update(_ request: Request, context: TicksRequestContext) async throws -> Response {
        try requireServer(context)
        let name = try requireID(try context.pathParameter("name"), Identifier.channelTypeName, "channel type name")
        var request = request
        let patch = try await request.decodeJSON(ChannelTypePatch.self)
        try validate(patch)
        let updated = try await store.updateChannelType(named: name, patch, now: .now())
        return try context.respond(try Self.withCommandNames(updated, in: context.apiVersion))
    }

    /// The config as Stream answers an update (and v2 lists a type in
    /// `app.channel_configs`): `commands` as their names (`["ban", "unban"]`),
    /// where a get answers the command objects.
    static func withCommandNames(_ config: ChannelConfig, in version: APIVersion) throws -> [String: JSONValue] {
        var answer = try JSONCoding.object(config, version: version)
        answer["commands"] = .array(config.commands.map { .string($0.name) })
        return answer
    }

    func requireServer(_ context: TicksRequestContext) throws {
        guard try context.requirePrincipal() == .server else {
            throw APIError.forbidden("only a server token may change channel types")
        }
    }

    func validate(_ patch: ChannelTypePatch) throws {
        if let commands = patch.commands {
            let known = Set(Command.all.map(\.name)).union(["all"])
            if let unknown = commands.first(where: { !known.contains($0) }) {
                throw APIError.input(
                    "command '\(unknown.prefix(64))' is not one Ticks offers: \(known.sorted().joined(separator: ", "))")
            }
        }
        if let permissions = patch.permissions, permissions != .null {
            throw APIError.input(
                "permissions cannot be changed: Ticks enforces fixed rules, which every channel type shows as its permissions")
        }
        _ = try withinBounds(patch.maxMessageLength, "max_message_length", 1...ChannelConfig.maxMessageLengthLimit)
    }
}
