import Foundation
import TicksProtocol
import TicksReceipts

extension ChannelModel {
    /// What every message's status is computed from: the channel's features
    /// and the cursors of the members the current user may see.
    struct StatusContext {
        let currentUserID: String
        let features: ReceiptFeatures
        let policy: GroupPolicy
        /// Each visible member's cursors, by user id.
        let cursors: [String: Cursors]
        /// How far every other member has read and received the current user's messages (R13), as positions.
        var allReached: Cursors? = nil
    }

    func statusContext(currentUserID: String, policy: GroupPolicy) -> StatusContext {
        let features = ReceiptFeatures(
            readEvents: config?.readEvents ?? true, deliveryEvents: config?.deliveryEvents ?? false)
        let memberIDs = Set(members.map(\.userID))
        var cursors: [String: Cursors] = [:]
        for userID in reads.keys where memberIDs.contains(userID) || !isLoaded {
            cursors[userID] = self.cursors(of: userID)
        }
        // A message not loaded is older than every loaded one (the newest are always loaded).
        let allReached = Cursors(
            read: position(of: readByAllUpTo) ?? 0, delivered: position(of: deliveredToAllUpTo) ?? 0)
        return StatusContext(
            currentUserID: currentUserID, features: features, policy: policy, cursors: cursors,
            allReached: isFresh ? allReached : nil)
    }

    /// The loaded message at `offset` as the app sees it, with its status.
    func chatMessage(at offset: Int, _ context: StatusContext) -> ChatMessage {
        let message = messages[offset]
        let seq = Seq(offset + 1)
        let own = message.user.id == context.currentUserID
        let readers = context.cursors.filter { $0.key != context.currentUserID && $0.key != message.user.id }.map(\.value)
        let features = context.features
        return ChatMessage(
            id: message.id, cid: cid, text: message.text, author: ChatUser(message.user),
            createdAt: message.createdAt.date, extraData: message.custom, isSentByCurrentUser: own, localState: nil,
            deliveryStatus: own
                ? ReceiptRules.status(
                    .stored(seq: seq), others: readers, features: features, policy: context.policy,
                    allReached: context.allReached)
                : nil,
            readCount: features.readEvents ? ReceiptRules.readCount(seq, others: readers) : 0,
            deliveredCount: features.deliveryEvents ? ReceiptRules.deliveredCount(seq, others: readers) : 0,
            isDeleted: message.deletedAt != nil, editedAt: message.textUpdatedAt?.date, replyCount: message.replyCount,
            parentId: message.parentID,
            isReadByAll: own && context.allReached.map { $0.read >= seq } == true,
            isDeliveredToAll: own && context.allReached.map { ReceiptRules.hasReceived(seq, $0) } == true,
            attachments: message.attachments, playedBy: (playedBy[message.id] ?? []).sorted(),
            position: seq)
    }

    /// An own message still in the outbox, pending or failed.
    func localMessage(_ entry: OutboxEntry, author: ChatUser, _ context: StatusContext) -> ChatMessage {
        let local: LocalSendState = entry.state == .pending ? .pending : .failed
        return ChatMessage(
            id: entry.id, cid: cid, text: entry.text, author: author,
            createdAt: Timestamp(microseconds: entry.createdAt).date, extraData: entry.extraData,
            isSentByCurrentUser: true,
            localState: entry.state == .pending ? .pending : .failed(reason: entry.lastError ?? "not sent"),
            deliveryStatus: ReceiptRules.status(local, others: [], features: context.features, policy: context.policy),
            readCount: 0, deliveredCount: 0, position: nil)
    }

    /// The channel as the app sees it: the server's messages with their
    /// statuses, then the current user's messages still in the outbox.
    func snapshot(currentUserID: String, currentUser: User?, outbox: [OutboxEntry], policy: GroupPolicy) -> ChatChannel {
        let context = statusContext(currentUserID: currentUserID, policy: policy)
        var chatMessages = messages.indices.map { chatMessage(at: $0, context) }
        let author = currentUser.map(ChatUser.init) ?? ChatUser(id: currentUserID)
        for entry in outbox where entry.cid == cid.rawValue && !hasMessage(entry.id) {
            chatMessages.append(localMessage(entry, author: author, context))
        }
        let memberIDs = Set(members.map(\.userID))
        let visibleReads = reads.values
            .filter { memberIDs.contains($0.user.id) || !isLoaded }
            .sorted { $0.user.id < $1.user.id }
            .map { read in
                ChatChannelRead(
                    user: ChatUser(read.user), lastReadAt: read.lastRead?.date, lastReadMessageId: read.lastReadMessageID,
                    unreadMessagesCount: read.user.id == currentUserID ? read.unreadMessages : nil,
                    lastDeliveredAt: read.lastDeliveredAt?.date, lastDeliveredMessageId: read.lastDeliveredMessageID)
            }
        return ChatChannel(
            cid: cid, currentUserID: currentUserID, isLoaded: isLoaded, isSynced: isFresh,
            hasOlderMessages: hasOlderMessages || hasOlderInCache, config: config.map(ChatChannelConfig.init),
            members: members.map { ChatUser($0.user) }, messages: chatMessages, reads: visibleReads,
            unreadCount: reads[currentUserID]?.unreadMessages ?? 0, policy: policy, cursors: context.cursors)
    }

    /// The channel as a channel list shows it: only its newest message's status is worked out.
    func summary(currentUserID: String, currentUser: User?, outbox: [OutboxEntry], policy: GroupPolicy)
        -> ChatChannelSummary?
    {
        guard let channel else { return nil }
        let context = statusContext(currentUserID: currentUserID, policy: policy)
        let pending = outbox.last { $0.cid == cid.rawValue && !hasMessage($0.id) }
        let lastMessage: ChatMessage? =
            if let pending {
                localMessage(pending, author: currentUser.map(ChatUser.init) ?? ChatUser(id: currentUserID), context)
            } else if !messages.isEmpty {
                chatMessage(at: messages.count - 1, context)
            } else {
                nil
            }
        let name: String? = if case .string(let text)? = channel.custom["name"] { text } else { nil }
        return ChatChannelSummary(
            cid: cid, name: name, members: members.map { ChatUser($0.user) }, memberCount: channel.memberCount,
            lastMessage: lastMessage, lastMessageAt: channel.lastMessageAt?.date, createdAt: channel.createdAt.date,
            updatedAt: channel.updatedAt.date, unreadCount: reads[currentUserID]?.unreadMessages ?? 0,
            config: ChatChannelConfig(channel.config), isSynced: isFresh)
    }
}
