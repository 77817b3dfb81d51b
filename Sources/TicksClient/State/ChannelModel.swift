import Foundation
import TicksProtocol
import TicksReceipts

/// What the client knows of one channel, kept as the server's wire objects,
/// and the one place events change it. Cursors are message ids; to compare
/// them the model gives each loaded message a position (1 = oldest loaded)
/// and moves cursors with `ReceiptRules`, the same rules the server applies.
struct ChannelModel: Sendable {
    let cid: ChannelID
    var channel: Channel?
    var members: [Member] = []
    /// The loaded messages, ordered as the server ordered them (its `created_at`
    /// strictly increases with its sequence).
    private(set) var messages: [Message] = []
    private var index: [String: Int] = [:]
    /// The read states the current user may see, by user id.
    var reads: [String: ReadState] = [:]
    /// The server's state has been seen: loaded now, or kept in the cache from an earlier run.
    var isLoaded = false
    /// Loaded from the server since this client connected (not only from the cache).
    var isFresh = false
    /// Whether the server may have messages older than the loaded ones.
    var hasOlderMessages = true
    /// Whether the device cache may hold older messages than the loaded ones.
    var hasOlderInCache = false
    /// False once the current user left the channel or it was deleted.
    var isMember = true
    /// The newest of the current user's messages every other member has
    /// read, and received, as the server tells it (R13): the facts
    /// `GroupPolicy.allMembers` goes by, whatever members are loaded.
    var readByAllUpTo: String?
    var deliveredToAllUpTo: String?
    /// Who played each loaded voice note or video, by message id, as `message.played` told it (R14).
    var playedBy: [String: Set<String>] = [:]
    /// Replies already counted in their parent's `replyCount` since it was loaded.
    private var countedReplies: Set<String> = []
    /// Edits and deletes heard of before the message itself (its `message.new` overtaken, or a catch-up's
    /// older answer applied after them), by id: the version used when the message arrives. At most
    /// `maxEarlyVersions`, the newest kept.
    private var earlyVersions: [String: Message] = [:]
    static let maxEarlyVersions = 256

    init(cid: ChannelID) {
        self.cid = cid
    }

    /// A channel as the device cache kept it: its head and newest message;
    /// the older messages come from the cache when the channel is opened.
    init(cid: ChannelID, cached head: CachedChannel.Head) {
        self.cid = cid
        channel = head.channel
        members = head.members
        reads = Dictionary(head.reads.map { ($0.user.id, $0) }, uniquingKeysWith: { $1 })
        setMessages(head.newest.map { [$0] } ?? [])
        isLoaded = true
        hasOlderMessages = head.hasOlderMessages
        hasOlderInCache = head.messageCount > 1
    }

    /// What the cache keeps of it; nil when there is nothing to keep.
    var cached: CachedChannel? {
        guard let channel, isLoaded, isMember else { return nil }
        return CachedChannel(
            cid: cid,
            head: CachedChannel.Head(
                channel: channel, members: members, reads: Array(reads.values), newest: messages.last,
                hasOlderMessages: hasOlderMessages, messageCount: messages.count),
            messages: messages)
    }

    var config: ChannelConfig? { channel?.config }
    var newest: Seq { Seq(messages.count) }

    /// A cursor's position: 0 for none, or for a message older than the loaded
    /// ones (a cursor never points past the newest message, R1); nil when the
    /// id is not loaded and may be newer (only possible for a live event that
    /// overtook its `message.new`).
    func position(of messageID: String?) -> Seq? {
        guard let messageID else { return 0 }
        return index[messageID].map { Seq($0 + 1) }
    }

    /// A member's cursors as positions; unknown ids count as older than the loaded messages.
    func cursors(of userID: String) -> Cursors {
        guard let read = reads[userID] else { return Cursors(read: 0, delivered: 0) }
        let readSeq = position(of: read.lastReadMessageID) ?? 0
        let deliveredSeq = position(of: read.lastDeliveredMessageID) ?? 0
        return Cursors(read: readSeq, delivered: max(deliveredSeq, readSeq))
    }

    func hasMessage(_ id: String) -> Bool { index[id] != nil }

    // MARK: Loading

    /// Takes the server's state, and says which other members' cursors
    /// moved forward compared with before (missed receipts). The state's
    /// messages are the newest; older ones already loaded stay when the two
    /// lists meet (history paged back stays), and go when there is a gap
    /// between them or the channel was truncated.
    mutating func load(_ state: ChannelState, currentUserID: String) -> [MessageReceipt] {
        let before = reads
        let truncated = state.channel.truncatedAt != channel?.truncatedAt
        channel = state.channel
        members = state.members
        let sorted = state.messages.sorted { $0.createdAt < $1.createdAt }
        if !truncated, let oldest = sorted.first, let at = index[oldest.id] {
            setMessages(Array(messages[..<at]) + sorted)
        } else {
            setMessages(sorted)
            if truncated { hasOlderInCache = false }
        }
        reads = Dictionary(state.read.map { ($0.user.id, $0) }, uniquingKeysWith: { $1 })
        readByAllUpTo = state.readByAllUpTo
        deliveredToAllUpTo = state.deliveredToAllUpTo
        let wasLoaded = isLoaded
        isLoaded = true
        isFresh = true
        isMember = state.membership != nil || state.members.contains { $0.userID == currentUserID }
        guard wasLoaded else { return [] }
        var receipts: [MessageReceipt] = []
        for (userID, read) in reads where userID != currentUserID {
            let previous = before[userID]
            let now = cursors(of: userID)
            let then = Cursors(
                read: position(of: previous?.lastReadMessageID) ?? 0,
                delivered: position(of: previous?.lastDeliveredMessageID) ?? 0)
            if now.read > then.read, let id = read.lastReadMessageID {
                receipts.append(receipt(.read, userID: userID, messageID: id, at: read.lastRead, user: read.user))
            } else if now.delivered > max(then.delivered, then.read), let id = read.lastDeliveredMessageID {
                receipts.append(
                    receipt(.delivered, userID: userID, messageID: id, at: read.lastDeliveredAt, user: read.user))
            }
        }
        return receipts
    }

    /// Adds a page of messages from before the oldest loaded one (`id_lt`),
    /// which the server returns contiguous with it; says how many were new.
    @discardableResult
    mutating func prependOlder(_ page: [Message]) -> Int {
        let oldest = messages.first?.createdAt
        let older = page.filter { message in index[message.id] == nil && oldest.map { message.createdAt < $0 } ?? true }
            .sorted { $0.createdAt < $1.createdAt }
        guard !older.isEmpty else { return 0 }
        setMessages(older + messages)
        return older.count
    }

    /// Adds the cache's older messages when they meet the loaded ones (the
    /// oldest loaded message is among them); with a gap between, they are
    /// not the loaded ones' past and are left out.
    mutating func prependCached(_ cached: [Message]) {
        hasOlderInCache = false
        guard let first = messages.first else {
            setMessages(cached.sorted { $0.createdAt < $1.createdAt })
            return
        }
        let sorted = cached.sorted { $0.createdAt < $1.createdAt }
        guard let at = sorted.firstIndex(where: { $0.id == first.id }) else { return }
        setMessages(Array(sorted[..<at]) + messages)
    }

    private mutating func setMessages(_ list: [Message]) {
        messages = list.sorted { $0.createdAt < $1.createdAt }
        reindex()
    }

    private mutating func reindex() {
        index = Dictionary(messages.enumerated().map { ($1.id, $0) }, uniquingKeysWith: { first, _ in first })
    }

    // MARK: Events

    /// What applying an event changed.
    struct Outcome {
        var changed = false
        var receipts: [MessageReceipt] = []
        /// The event named a message the model does not have: reload the channel.
        var needsReload = false
    }

    /// Applies a channel event; cursor events move cursors only forward (R2),
    /// except the current user's own mark unread.
    mutating func apply(_ event: Event, currentUserID: String) -> Outcome {
        var outcome = Outcome()
        switch event.type {
        case .messageNew:
            guard let message = event.message else { break }
            if let parentID = message.parentID { outcome.changed = countReply(message.id, to: parentID) }
            // A reply shown only in its thread is not one of the channel's messages.
            guard message.parentID == nil || message.showInChannel else { break }
            outcome.changed = stored(message, currentUserID: currentUserID) || outcome.changed
            // The recipient's own count as the server has it after this message.
            if let unread = event.unreadCount, reads[currentUserID] != nil, reads[currentUserID]?.unreadMessages != unread {
                reads[currentUserID]?.unreadMessages = unread
                outcome.changed = true
            }
        case .messageRead:
            // A thread marked read moves that thread's read state, not the channel's cursors.
            guard event.thread == nil, let user = event.user else { break }
            guard let seq = position(of: event.lastReadMessageID) else {
                // Another member's cursor at a message not loaded: load the channel. The user's
                // own (this device's receipt echoed, or another device's) needs no reload: the
                // message comes with the catch-up, and the counts with notification.mark_read.
                outcome.needsReload = user.id != currentUserID
                break
            }
            let update = ReceiptRules.markRead(cursors(of: user.id), upTo: seq, newest: newest)
            guard update.changed else { break }
            applyMoves(update, userID: user.id, user: user, messageID: event.lastReadMessageID, at: event.createdAt)
            outcome.changed = true
            if user.id != currentUserID, update.moved(.read), let id = event.lastReadMessageID {
                outcome.receipts.append(receipt(.read, userID: user.id, messageID: id, at: event.createdAt, user: user))
            }
        case .messageDelivered:
            guard let user = event.user else { break }
            guard let seq = position(of: event.lastDeliveredMessageID) else {
                outcome.needsReload = user.id != currentUserID
                break
            }
            let at = event.lastDeliveredAt ?? event.createdAt
            let update = ReceiptRules.markDelivered(cursors(of: user.id), upTo: seq, newest: newest)
            guard update.changed else { break }
            applyMoves(update, userID: user.id, user: user, messageID: event.lastDeliveredMessageID, at: at)
            outcome.changed = true
            if user.id != currentUserID, let id = event.lastDeliveredMessageID {
                outcome.receipts.append(receipt(.delivered, userID: user.id, messageID: id, at: at, user: user))
            }
        case .notificationMarkRead:
            // The reader's own cursor as the server has it now (a sync tells it only this way).
            guard reads[currentUserID] != nil else { break }
            if let unread = event.unreadCount { reads[currentUserID]?.unreadMessages = unread }
            if let id = event.lastReadMessageID, position(of: id) != nil,
                reads[currentUserID]?.lastReadMessageID != id
            {
                reads[currentUserID]?.lastReadMessageID = id
                reads[currentUserID]?.lastRead = event.createdAt
            }
            outcome.changed = true
        case .notificationMarkThreadsRead:
            // No channel's read state moves (the client's totals take its counts).
            break
        case .notificationMarkUnread:
            guard let seq = position(of: event.lastReadMessageID) else {
                outcome.needsReload = true
                break
            }
            let update = ReceiptRules.markUnread(cursors(of: currentUserID), from: seq + 1)
            if update.changed {
                reads[currentUserID]?.lastReadMessageID = event.lastReadMessageID
                reads[currentUserID]?.lastRead = event.lastReadAt ?? event.createdAt
            }
            reads[currentUserID]?.unreadMessages = event.unreadMessages
            reads[currentUserID]?.firstUnreadMessageID = event.firstUnreadMessageID
            outcome.changed = true
        case .memberAdded:
            guard let member = event.member, !members.contains(where: { $0.userID == member.userID }) else { break }
            members.append(member)
            if member.userID == currentUserID { isMember = true }
            // R5: a new member has received and read everything already there.
            let newestID = messages.last?.id
            let showsRead = showsReads(of: member.user, currentUserID: currentUserID)
            let showsDelivered = showsDeliveries(of: member.user, currentUserID: currentUserID)
            if showsRead || showsDelivered {
                reads[member.userID] = ReadState(
                    user: member.user, lastRead: showsRead ? event.createdAt : nil,
                    lastReadMessageID: showsRead ? newestID : nil,
                    unreadMessages: member.userID == currentUserID ? 0 : nil, firstUnreadMessageID: nil,
                    lastDeliveredAt: showsDelivered ? event.createdAt : nil,
                    lastDeliveredMessageID: showsDelivered ? newestID : nil)
            }
            outcome.changed = true
        case .memberRemoved:
            guard let userID = event.member?.userID ?? event.user?.id else { break }
            // R6: the removed member's reads go with them.
            members.removeAll { $0.userID == userID }
            reads[userID] = nil
            if userID == currentUserID { isMember = false }
            outcome.changed = true
        case .messageUpdated, .messageDeleted:
            // An edit or a delete changes the message, never the receipts: it keeps its place.
            guard let message = event.message else { break }
            outcome.changed = replace(message)
        case .memberUpdated:
            guard let member = event.member, let at = members.firstIndex(where: { $0.userID == member.userID }) else {
                break
            }
            members[at] = member
            outcome.changed = true
        case .channelUpdated:
            guard let updated = event.channel else { break }
            channel = updated
            outcome.changed = true
        case .notificationAddedToChannel:
            channel = event.channel ?? channel
            isMember = true
            outcome.changed = true
            // Its members, messages and read states are not in the event.
            outcome.needsReload = !isLoaded
        case .notificationRemovedFromChannel:
            // The current user left or was removed: member.removed says the same, for others too.
            channel = event.channel ?? channel
            members.removeAll { $0.userID == currentUserID }
            reads[currentUserID] = nil
            isMember = false
            outcome.changed = true
        case .channelTruncated:
            // Every message so far is gone and every cursor past them: load the channel again.
            let truncatedAt = event.channel?.truncatedAt ?? event.createdAt
            setMessages(messages.filter { truncatedAt < $0.createdAt })
            channel = event.channel ?? channel
            hasOlderInCache = false
            outcome.changed = true
            outcome.needsReload = true
        case .channelDeleted:
            channel = event.channel ?? channel
            setMessages([])
            reads = [:]
            members = []
            isMember = false
            outcome.changed = true
        case .messageReadByAll, .messageDeliveredToAll:
            // Only forward: a later event may be overtaken by a reload's older state, never the reverse.
            guard let id = event.messageID else { break }
            let read = event.type == .messageReadByAll
            let current = read ? readByAllUpTo : deliveredToAllUpTo
            if let current, let known = position(of: current), (position(of: id) ?? 0) <= known { break }
            if read { readByAllUpTo = id } else { deliveredToAllUpTo = id }
            outcome.changed = true
        case .messagePlayed:
            // R14: a member played a voice note or video (the server sends only what this user may see).
            guard let id = event.messageID, let user = event.user, index[id] != nil else { break }
            outcome.changed = playedBy[id, default: []].insert(user.id).inserted
        case .healthCheck, .channelCreated:
            break
        case .typingStart, .typingStop:
            // Who is typing is not kept in a channel's state.
            break
        case .notificationMessageNew:
            // Only for connections that watch channels; this SDK never watches (it hears `message.new`).
            break
        }
        return outcome
    }

    /// A reply to a loaded message adds one to its reply count, once per reply
    /// (a reply may be heard of twice: live and in a catch-up).
    private mutating func countReply(_ id: String, to parentID: String) -> Bool {
        guard let at = index[parentID], !countedReplies.contains(id) else { return false }
        countedReplies.insert(id)
        messages[at].replyCount += 1
        return true
    }

    /// Whether `candidate` is a later version of a message than `current`:
    /// a delete is final (nothing after it brings the message back), and
    /// otherwise the version changed last wins. Events and catch-ups may
    /// arrive in any order; the state only moves forward.
    static func supersedes(_ candidate: Message, _ current: Message) -> Bool {
        if current.deletedAt != nil { return false }
        if candidate.deletedAt != nil { return true }
        return candidate.updatedAt > current.updatedAt
    }

    /// Replaces a loaded message by its new version (edited or deleted); false when it is not
    /// loaded, or the version is not newer than the one there. A version of a message not yet
    /// here is kept for when it comes (`earlyVersions`).
    private mutating func replace(_ message: Message) -> Bool {
        guard let at = index[message.id] else {
            if earlyVersions[message.id].map({ Self.supersedes(message, $0) }) ?? true {
                earlyVersions[message.id] = message
                if earlyVersions.count > Self.maxEarlyVersions,
                    let oldest = earlyVersions.values.min(by: { $0.createdAt < $1.createdAt })
                {
                    earlyVersions[oldest.id] = nil
                }
            }
            return false
        }
        let current = messages[at]
        guard current.deletedAt == nil || message.deletedAt != nil, message.updatedAt >= current.updatedAt else {
            return false
        }
        messages[at] = message
        return true
    }

    /// Adds a message the server stored (from `message.new` or a send's
    /// answer) and moves its author's cursors to it, as the server did (R4);
    /// false when it was already there. Only the cursors the server shows
    /// this user move: a send by someone whose reads are private (R8, R10)
    /// must not make them a reader of earlier messages here.
    @discardableResult
    mutating func stored(_ message: Message, currentUserID: String) -> Bool {
        var message = message
        if let early = earlyVersions.removeValue(forKey: message.id), Self.supersedes(early, message) { message = early }
        if let at = index[message.id] {
            // Heard of again (live and in a catch-up, which tells a message in its state now):
            // a later version replaces the one here; the cursors moved when it first came.
            guard Self.supersedes(message, messages[at]) else { return false }
            messages[at] = message
            return true
        }
        guard insert(message), let seq = position(of: message.id) else { return false }
        if let current = channel, (current.lastMessageAt ?? current.createdAt) < message.createdAt,
            message.parentID == nil || message.showInChannel
        {
            // As the server keeps them: a message updates the channel too.
            channel?.lastMessageAt = message.createdAt
            channel?.updatedAt = max(current.updatedAt, message.createdAt)
        }
        let author = message.user.id
        guard let shown = reads[author] else { return true }
        var update = ReceiptRules.sent(cursors(of: author), seq: seq)
        if !showsReads(of: shown.user, currentUserID: currentUserID) {
            update.moves.removeAll { $0.kind == .read }
        }
        applyMoves(update, userID: author, user: message.user, messageID: message.id, at: message.createdAt)
        // R4: an own message that is the newest leaves nothing unread before it.
        if author == currentUserID, seq == newest { reads[author]?.unreadMessages = 0 }
        return true
    }

    private mutating func insert(_ message: Message) -> Bool {
        guard index[message.id] == nil else { return false }
        if let last = messages.last, message.createdAt < last.createdAt {
            let at = messages.firstIndex { $0.createdAt > message.createdAt } ?? messages.endIndex
            messages.insert(message, at: at)
            reindex()
        } else {
            messages.append(message)
            index[message.id] = messages.count - 1
        }
        return true
    }

    /// Whether the server shows `user`'s reads to the current user (R8, R10);
    /// before the channel's config is known, as if read events were on.
    private func showsReads(of user: User, currentUserID: String) -> Bool {
        user.readsVisible(to: currentUserID, readEvents: config?.readEvents != false)
    }

    private func showsDeliveries(of user: User, currentUserID: String) -> Bool {
        user.deliveriesVisible(
            to: currentUserID, readEvents: config?.readEvents != false, deliveryEvents: config?.deliveryEvents != false)
    }

    /// Writes the moves of a rule's update back as message ids and times.
    private mutating func applyMoves(
        _ update: CursorUpdate, userID: String, user: User, messageID: String?, at: Timestamp
    ) {
        guard update.changed else { return }
        var read = reads[userID] ?? ReadState(
            user: user, lastRead: nil, lastReadMessageID: nil, unreadMessages: nil, firstUnreadMessageID: nil,
            lastDeliveredAt: nil, lastDeliveredMessageID: nil)
        for move in update.moves {
            switch move.kind {
            case .read:
                read.lastReadMessageID = messageID
                read.lastRead = at
            case .delivered:
                read.lastDeliveredMessageID = messageID
                read.lastDeliveredAt = at
            }
        }
        reads[userID] = read
    }

    private func receipt(
        _ type: MessageReceipt.ReceiptType, userID: String, messageID: String, at: Timestamp?, user: User
    ) -> MessageReceipt {
        MessageReceipt(
            messageId: messageID, cid: cid, user: ChatUser(user), receiptType: type,
            deliveredAt: type == .delivered ? at?.date : nil, readAt: type == .read ? at?.date : nil)
    }

    /// The current user marked every channel read: their cursors move to the
    /// newest message, as the server's will (its events follow).
    mutating func markedAllRead(currentUserID: String, at: Timestamp) -> Bool {
        guard reads[currentUserID] != nil, let newestID = messages.last?.id else { return false }
        let update = ReceiptRules.markRead(cursors(of: currentUserID), upTo: newest, newest: newest)
        let user = reads[currentUserID]?.user ?? User(id: currentUserID)
        applyMoves(update, userID: currentUserID, user: user, messageID: newestID, at: at)
        let changed = update.changed || reads[currentUserID]?.unreadMessages != 0
        reads[currentUserID]?.unreadMessages = 0
        reads[currentUserID]?.firstUnreadMessageID = nil
        return changed
    }

    // MARK: Delivered

    /// The newest loaded message from someone else that the current user's
    /// devices have not yet marked delivered (R1: reading counts).
    func undeliveredFromOthers(currentUserID: String) -> Message? {
        guard let newestFromOthers = messages.last(where: { $0.user.id != currentUserID }),
            let seq = position(of: newestFromOthers.id)
        else { return nil }
        let own = cursors(of: currentUserID)
        return ReceiptRules.hasReceived(seq, own) ? nil : newestFromOthers
    }

    /// Whether the current user's delivered cursor is at or past the message.
    func isDelivered(_ messageID: String, currentUserID: String) -> Bool {
        guard let seq = position(of: messageID) else { return false }
        return ReceiptRules.hasReceived(seq, cursors(of: currentUserID))
    }
}
