import TicksProtocol
import TicksReceipts

/// The decisions both stores make inside their transactions, as pure code:
/// each store only reads what they need and writes what they decide.
enum StoreRules {
    /// A channel takes at most `maxMembers` members (`ServerLimits.maxChannelMembers`).
    static func requireRoom(for newcomers: Int, in channel: ChannelRecord, maxMembers: Int) throws(StoreError) {
        guard channel.memberCount + newcomers <= maxMembers else {
            throw .tooManyMembers(cid: channel.cid, members: channel.memberCount, adding: newcomers, limit: maxMembers)
        }
    }

    /// The channel type a stored channel names; gone only if removed behind the server's back.
    static func requireConfig(_ found: (channel: ChannelRecord, config: ChannelConfig?)) throws(StoreError)
        -> ChannelConfig
    {
        guard let config = found.config else { throw .channelTypeNotFound(found.channel.type) }
        return config
    }

    /// When a new message is stored: now, or just after the channel's last
    /// message, so a channel's messages are in the same order by `seq` and by
    /// `created_at` (strictly increasing) and clients may order them by time alone.
    static func messageTime(now: Timestamp, after last: Timestamp?) -> Timestamp {
        Timestamp(microseconds: max(now.microseconds, (last?.microseconds ?? 0) + 1))
    }

    /// R11: a message id already stored is the retry of that send when it is
    /// in this channel (nothing changes); in another channel it is refused.
    static func resend(of stored: MessageRecord, to channel: ChannelRecord) throws(StoreError) -> SendOutcome {
        guard stored.channelPK == channel.pk else { throw .messageIDInOtherChannel(stored.id) }
        // A retry finds its message; an id whose message is gone (hard-deleted, truncated away) stays used.
        guard !stored.hardDeleted, stored.seq > channel.truncatedSeq else { throw .messageIDOfRemovedMessage(stored.id) }
        return SendOutcome(message: stored, created: false, recipients: [])
    }

    /// A new message's outcome, before its recipients are read (`SQLStore.sendMessage`).
    static func sent(_ new: NewMessage, to channel: ChannelRecord, seq: Seq, at createdAt: Timestamp) -> SendOutcome {
        var message = MessageRecord(
            id: new.id, channelPK: channel.pk, cid: channel.cid, seq: seq, userID: new.userID, text: new.text,
            custom: new.custom, createdAt: createdAt, hidden: new.threadOnly, parentID: new.parentID,
            showInChannel: new.showInChannel)
        message.attachments = new.attachments
        return SendOutcome(message: message, created: true, recipients: [])
    }

    /// The message `messageID` must be one of `channel`'s.
    static func requireSeq(_ seq: Seq?, of messageID: String, in cid: ChannelID) throws(StoreError) -> Seq {
        guard let seq else { throw .messageNotInChannel(messageID: messageID, cid: cid) }
        return seq
    }

    /// The users a channel snapshot shows: members, authors and the creator.
    static func userIDs(members: [MemberState], messages: [MessageRecord], createdBy: String?) -> Set<String> {
        var ids = Set(members.map(\.userID)).union(messages.map(\.userID))
        if let createdBy { ids.insert(createdBy) }
        return ids
    }

    /// Every user a change names must have been upserted first.
    static func requireUsers(_ ids: [String], found: [String: User]) throws(StoreError) {
        if let missing = ids.first(where: { found[$0] == nil }) { throw .unknownUser(missing) }
    }
}

/// What a mark delivered request resolves to: for each channel named, the
/// furthest message, in channel order — the order in which every
/// transaction locks members, so two requests never wait for each other in a
/// circle. Entries for channel types with `delivery_events` off are accepted
/// and dropped (R9).
struct DeliveredPlan {
    struct Target {
        var channel: ChannelRecord
        var config: ChannelConfig
        var seq: Seq
    }

    private var byChannel: [Int64: Target] = [:]

    /// Checks one entry as the store resolved it: the channel exists, holds the
    /// message and has the user as a member — all or nothing for the request.
    mutating func add(
        _ entry: DeliveredTarget, found: (channel: ChannelRecord, config: ChannelConfig?)?, seq: Seq?, isMember: Bool,
        userID: String
    ) throws(StoreError) {
        let cid = entry.channel
        guard let found else { throw .unknownChannel(cid) }
        guard isMember else { throw .notMember(userID: userID, cid: cid) }
        // A message that is not there is accepted and ignored, as Stream does.
        guard let seq else { return }
        let config = try StoreRules.requireConfig(found)
        guard config.deliveryEvents else { return }
        let pk = found.channel.pk
        byChannel[pk] = Target(channel: found.channel, config: config, seq: max(byChannel[pk]?.seq ?? 0, seq))
    }

    /// One target a channel, in channel order.
    var targets: [Target] { byChannel.keys.sorted().compactMap { byChannel[$0] } }
}
