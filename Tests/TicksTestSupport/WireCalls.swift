/// The HTTP verbs a test calls the API with.
public enum WireVerb: String, Sendable {
    case get = "GET"
    case post = "POST"
    case put = "PUT"
    case patch = "PATCH"
    case delete = "DELETE"
}

/// A server a test drives through its HTTP API: the server's tests
/// (`TestServer`) and the SDK's (`LiveServer`) set up users, channels,
/// messages and receipts with the same calls, written once below.
public protocol WireCalls: Sendable {
    /// One call that must succeed, as the server (`user` nil: a server token)
    /// or as `user` (their user token); the answer's JSON.
    ///
    /// What failing means (a test's issue or a thrown error) and how long a
    /// call may wait are the conformer's.
    @discardableResult
    func wireCall(_ verb: WireVerb, _ path: String, _ body: String?, as user: String?) async throws -> JSON
}

extension WireCalls {
    // MARK: The usual set-up of a test

    /// Creates or replaces users, each named after its id; those in
    /// `privateReads` or `privateDeliveries` keep those receipts to themselves (R10).
    public func upsert(_ ids: String..., privateReads: Set<String> = [], privateDeliveries: Set<String> = [])
        async throws
    {
        let users = ids.map { id in
            var privacy: [String] = []
            if privateReads.contains(id) { privacy.append("\"read_receipts\": {\"enabled\": false}") }
            if privateDeliveries.contains(id) { privacy.append("\"delivery_receipts\": {\"enabled\": false}") }
            let settings = privacy.isEmpty ? "" : ", \"privacy_settings\": {\(privacy.joined(separator: ","))}"
            return "\"\(id)\": {\"id\": \"\(id)\", \"name\": \"\(id.capitalized)\"\(settings)}"
        }
        try await wireCall(.post, "/users", "{\"users\": {\(users.joined(separator: ","))}}", as: nil)
    }

    /// Creates the channel `cid` (`type:id`) with these members.
    public func createChannel(_ cid: String, members: [String], createdBy: String? = nil) async throws {
        let list = members.map { "\"\($0)\"" }.joined(separator: ",")
        let creator = createdBy.map { ", \"created_by\": {\"id\": \"\($0)\"}" } ?? ""
        try await wireCall(
            .post, "/channels/\(path(cid))/query", "{\"data\": {\"members\": [\(list)]\(creator)}}", as: nil)
    }

    /// Creates a channel type whose read and delivery events are on or off (R8, R9).
    public func createChannelType(_ name: String, readEvents: Bool, deliveryEvents: Bool) async throws {
        try await wireCall(
            .post, "/channeltypes",
            "{\"name\": \"\(name)\", \"read_events\": \(readEvents), \"delivery_events\": \(deliveryEvents)}", as: nil)
    }

    /// Adds members to the channel.
    public func addMembers(_ cid: String, _ ids: [String]) async throws {
        let list = ids.map { "\"\($0)\"" }.joined(separator: ",")
        try await wireCall(.post, "/channels/\(path(cid))", "{\"add_members\": [\(list)]}", as: nil)
    }

    /// Removes members from the channel.
    public func removeMembers(_ cid: String, _ ids: [String]) async throws {
        let list = ids.map { "\"\($0)\"" }.joined(separator: ",")
        try await wireCall(.post, "/channels/\(path(cid))", "{\"remove_members\": [\(list)]}", as: nil)
    }

    // MARK: Messages and receipts

    /// Sends message `id` from `user`; the answer.
    @discardableResult
    public func send(_ cid: String, id: String, from user: String, text: String = "hello") async throws -> JSON {
        try await wireCall(
            .post, "/channels/\(path(cid))/message",
            "{\"message\": {\"id\": \"\(id)\", \"text\": \"\(text)\", \"user\": {\"id\": \"\(user)\"}}}", as: nil)
    }

    /// Sends voice note `id` from `user`: no text, one `voiceRecording` attachment (R14).
    @discardableResult
    public func sendVoiceNote(_ cid: String, id: String, from user: String) async throws -> JSON {
        try await wireCall(
            .post, "/channels/\(path(cid))/message",
            "{\"message\": {\"id\": \"\(id)\", \"text\": \"\", \"user\": {\"id\": \"\(user)\"}, "
                + "\"attachments\": [{\"type\": \"voiceRecording\", \"asset_url\": \"https://example.com/\(id).m4a\"}]}}",
            as: nil)
    }

    /// Marks message `id` played by `user` (R14), naming them with the server token; the answer.
    @discardableResult
    public func markPlayed(_ id: String, by user: String) async throws -> JSON {
        try await wireCall(.post, "/messages/\(id)/played", "{\"user_id\": \"\(user)\"}", as: nil)
    }

    /// Marks the channel read for `user`, up to `messageID` or to its last message.
    @discardableResult
    public func markRead(_ cid: String, _ user: String, upTo messageID: String? = nil) async throws -> JSON {
        let message = messageID.map { ", \"message_id\": \"\($0)\"" } ?? ""
        return try await wireCall(
            .post, "/channels/\(path(cid))/read", "{\"user\": {\"id\": \"\(user)\"}\(message)}", as: nil)
    }

    /// Marks the channel unread for `user` from `messageID` on.
    public func markUnread(_ cid: String, _ user: String, from messageID: String) async throws {
        try await wireCall(
            .post, "/channels/\(path(cid))/unread",
            "{\"user\": {\"id\": \"\(user)\"}, \"message_id\": \"\(messageID)\"}", as: nil)
    }

    /// Marks each entry's message (`id` in channel `cid`) delivered to `user`, in one call.
    public func markDelivered(_ user: String, _ entries: [(cid: String, id: String)]) async throws {
        let list = entries.map { "{\"cid\": \"\($0.cid)\", \"id\": \"\($0.id)\"}" }.joined(separator: ",")
        try await wireCall(
            .post, "/channels/delivered?user_id=\(user)",
            "{\"latest_delivered_messages\": [\(list)], \"user_id\": \"\(user)\"}", as: nil)
    }

    // MARK: What the server has

    /// The channel's state as `viewer` (a user token) or the server sees it.
    public func state(_ cid: String, as viewer: String? = nil) async throws -> JSON {
        try await wireCall(.post, "/channels/\(path(cid))/query", "{}", as: viewer)
    }

    /// `viewer`'s view of `member`'s read state (its cursors and unread
    /// count), nil when it is not shown.
    public func readState(_ cid: String, of member: String, as viewer: String? = nil) async throws -> JSON? {
        try await state(cid, as: viewer)["read"].array.first { $0["user"]["id"].string == member }
    }

    /// The ids of the channel's messages as the server has them, oldest first.
    public func messageIDs(_ cid: String) async throws -> [String] {
        let state = try await wireCall(
            .post, "/channels/\(path(cid))/query", "{\"messages\": {\"limit\": 300}}", as: nil)
        return state["messages"].array.compactMap { $0["id"].string }
    }

    /// Who read and who has message `messageID`, as `viewer` or the server sees it.
    public func receipts(_ messageID: String, as viewer: String? = nil) async throws -> JSON {
        try await wireCall(.get, "/messages/\(messageID)/receipts", nil, as: viewer)
    }

    /// A channel's `type:id` as a path: `type/id`.
    public func path(_ cid: String) -> String { cid.replacingOccurrences(of: ":", with: "/") }
}
