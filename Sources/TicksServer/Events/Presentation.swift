import TicksProtocol
import TicksReceipts

/// Builds wire objects from stored records.
enum Presenter {
    static func user(_ id: String, _ users: [String: User]) -> User {
        users[id] ?? User(id: id)
    }

    static func message(_ record: MessageRecord, users: [String: User]) -> Message {
        var message = Message(
            id: record.id, cid: record.cid, text: record.text, user: user(record.userID, users),
            createdAt: record.createdAt, updatedAt: record.updatedAt ?? record.createdAt, custom: record.custom,
            deletedAt: record.deletedAt, textUpdatedAt: record.textUpdatedAt)
        message.parentID = record.parentID
        message.showInChannel = record.showInChannel
        message.replyCount = record.replyCount
        message.attachments = record.attachments
        return message
    }

    static func channel(_ record: ChannelRecord, config: ChannelConfig, users: [String: User]) -> Channel {
        var channel = Channel(
            id: record.id, type: record.type, createdAt: record.createdAt, updatedAt: record.updatedAt,
            createdBy: record.createdBy.map { user($0, users) }, memberCount: record.memberCount,
            lastMessageAt: record.lastMessageAt, config: config, custom: record.custom)
        channel.truncatedAt = record.truncatedAt
        return channel
    }

    static func member(_ state: MemberState, of channel: ChannelRecord, users: [String: User]) -> Member {
        var member = Member(
            user: user(state.userID, users), createdAt: state.joinedAt, channelRole: state.channelRole,
            isCreator: channel.createdBy == state.userID)
        member.custom = state.custom
        return member
    }

    /// The read state as `visibility.viewer` may see it; nil when none of it is visible.
    static func readState(_ state: MemberState, users: [String: User], visibility: ReceiptVisibility) -> ReadState? {
        let showRead = visibility.readVisible(state.userID)
        let showDelivered = visibility.deliveredVisible(state.userID)
        guard showRead || showDelivered else { return nil }
        return ReadState(
            user: user(state.userID, users),
            lastRead: showRead ? state.lastRead : nil,
            lastReadMessageID: showRead ? state.lastReadMessageID : nil,
            unreadMessages: showRead ? state.unread : nil,
            firstUnreadMessageID: showRead ? state.firstUnreadMessageID : nil,
            lastDeliveredAt: showDelivered ? state.lastDelivered : nil,
            lastDeliveredMessageID: showDelivered ? state.lastDeliveredMessageID : nil)
    }

    /// The channel as `viewer` sees it, `capabilities` being what they may do in it (`own_capabilities`).
    static func channelState(
        _ snapshot: ChannelSnapshot, viewer: String?, capabilities: [String], watcherCount: Int,
        allReached: AllReachedUpTo = AllReachedUpTo(), seesReadsAsDeliveries: Bool
    ) -> ChannelState {
        let visibility = ReceiptVisibility(
            config: snapshot.config, users: snapshot.users, viewer: viewer,
            seesReadsAsDeliveries: seesReadsAsDeliveries)
        let users = snapshot.users
        var state = ChannelState(
            channel: channel(snapshot.channel, config: snapshot.config, users: users),
            members: snapshot.members.map { member($0, of: snapshot.channel, users: users) },
            messages: snapshot.messages.map { message($0, users: users) },
            read: snapshot.members.compactMap { readState($0, users: users, visibility: visibility) },
            watcherCount: watcherCount,
            membership: snapshot.members.first { $0.userID == viewer }.map {
                member($0, of: snapshot.channel, users: users)
            })
        state.channel.ownCapabilities = capabilities
        state.readByAllUpTo = visibility.seesReadsAsDeliveries ? nil : allReached.read
        state.deliveredToAllUpTo = allReached.delivered
        return state
    }

    /// The receipts of one message as `viewer` may see them, most recent first.
    static func receipts(_ receipts: MessageReceipts, viewer: String?, seesReadsAsDeliveries: Bool)
        -> ReceiptsResponse
    {
        let visibility = ReceiptVisibility(
            config: receipts.config, users: receipts.users, viewer: viewer,
            seesReadsAsDeliveries: seesReadsAsDeliveries)
        let entries = receipts.entries.compactMap { entry -> Receipt? in
            let readAt = visibility.readVisible(entry.userID) ? entry.readAt : nil
            let deliveredAt = visibility.deliveredVisible(entry.userID) ? entry.deliveredAt : nil
            // A play is seen by whoever may see the member's reads (R14).
            let playedAt = visibility.readVisible(entry.userID) ? entry.playedAt : nil
            guard readAt != nil || deliveredAt != nil || playedAt != nil else { return nil }
            return Receipt(
                user: user(entry.userID, receipts.users), deliveredAt: deliveredAt, readAt: readAt,
                deliveredAtExact: deliveredAt.map { _ in entry.deliveredExact },
                readAtExact: readAt.map { _ in entry.readExact }, playedAt: playedAt)
        }.sorted { lhs, rhs in
            let left = lhs.readAt ?? lhs.deliveredAt ?? lhs.playedAt!
            let right = rhs.readAt ?? rhs.deliveredAt ?? rhs.playedAt!
            return left != right ? left > right : lhs.user.id < rhs.user.id
        }
        return ReceiptsResponse(
            cid: receipts.channel.cid, receipts: entries, readCount: entries.count { $0.readAt != nil },
            deliveredCount: entries.count { $0.deliveredAt != nil },
            readByAll: receipts.readByAll && !visibility.seesReadsAsDeliveries,
            deliveredToAll: receipts.deliveredToAll, playedCount: entries.count { $0.playedAt != nil })
    }
}
