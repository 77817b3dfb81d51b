import TicksProtocol

/// Deletes a channel and tells its members (`channel.deleted`): for
/// `DELETE /channels/{type}/{id}`, `POST /channels/delete`, and the
/// conversations of `POST /users/delete`.
struct ChannelDeleter {
    let store: any TicksStore
    let events: EventPublisher

    /// Deletes `channel` and returns it as it was, deleted.
    func delete(_ channel: ChannelRecord, hard: Bool, by actingUserID: String?) async throws -> Channel {
        let snapshot = try await store.snapshot(of: channel, messageLimit: 0, page: .newest)
        let now = Timestamp.now()
        let members = try await store.deleteChannel(channel, hard: hard, by: actingUserID, now: now)
        return try tell(snapshot, deletedAt: now, to: members, by: actingUserID)
    }

    /// Deletes `channel` if it is a conversation of `userID` (two members,
    /// one of them `userID`) when the store looks; whether it did.
    func deleteConversation(_ channel: ChannelRecord, of userID: String, hard: Bool) async throws -> Bool {
        let snapshot = try await store.snapshot(of: channel, messageLimit: 0, page: .newest)
        let now = Timestamp.now()
        guard let members = try await store.deleteConversation(channel, of: userID, hard: hard, now: now) else {
            return false
        }
        _ = try tell(snapshot, deletedAt: now, to: members, by: nil)
        return true
    }

    private func tell(
        _ snapshot: ChannelSnapshot, deletedAt now: Timestamp, to members: [String], by actingUserID: String?
    ) throws -> Channel {
        let event = ChangeEvents.channel(
            .channelDeleted, snapshot.channel, config: snapshot.config, users: snapshot.users, by: actingUserID,
            at: now)
        try events.send(event, to: members)
        return event.channel!
    }
}
