import Foundation
import TicksProtocol
import TicksReceipts

extension ChannelModel {
    /// The channel as the app sees it: the server's messages with their
    /// statuses, then the current user's messages still in the outbox.
    func snapshot(currentUserID: String, currentUser: User?, outbox: [OutboxEntry], policy: GroupPolicy) -> ChatChannel {
        let features = ReceiptFeatures(readEvents: config?.readEvents ?? true, deliveryEvents: config?.deliveryEvents ?? false)
        let memberIDs = Set(members.map(\.userID))
        var cursors: [String: Cursors] = [:]
        for userID in reads.keys where memberIDs.contains(userID) || !isLoaded {
            cursors[userID] = self.cursors(of: userID)
        }
        let others = cursors.filter { $0.key != currentUserID }

        var chatMessages: [ChatMessage] = []
        for (offset, message) in messages.enumerated() {
            let seq = Seq(offset + 1)
            let own = message.user.id == currentUserID
            let readers = others.filter { $0.key != message.user.id }.map(\.value)
            chatMessages.append(
                ChatMessage(
                    id: message.id, cid: cid, text: message.text, author: ChatUser(message.user),
                    createdAt: message.createdAt.date, extraData: message.custom, isSentByCurrentUser: own,
                    localState: nil,
                    deliveryStatus: own
                        ? ReceiptRules.status(.stored(seq: seq), others: readers, features: features, policy: policy)
                        : nil,
                    readCount: features.readEvents ? ReceiptRules.readCount(seq, others: readers) : 0,
                    deliveredCount: features.deliveryEvents ? ReceiptRules.deliveredCount(seq, others: readers) : 0,
                    isDeleted: message.deletedAt != nil, editedAt: message.textUpdatedAt?.date,
                    replyCount: message.replyCount, parentId: message.parentID, position: seq))
        }
        let author = currentUser.map(ChatUser.init) ?? ChatUser(id: currentUserID)
        for entry in outbox where entry.cid == cid.rawValue && !hasMessage(entry.id) {
            let local: LocalSendState = entry.state == .pending ? .pending : .failed
            chatMessages.append(
                ChatMessage(
                    id: entry.id, cid: cid, text: entry.text, author: author,
                    createdAt: Timestamp(microseconds: entry.createdAt).date, extraData: entry.extraData,
                    isSentByCurrentUser: true,
                    localState: entry.state == .pending ? .pending : .failed(reason: entry.lastError ?? "not sent"),
                    deliveryStatus: ReceiptRules.status(local, others: [], features: features, policy: policy),
                    readCount: 0, deliveredCount: 0, position: nil))
        }

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
            cid: cid, currentUserID: currentUserID, isLoaded: isLoaded, config: config.map(ChatChannelConfig.init),
            members: members.map { ChatUser($0.user) }, messages: chatMessages, reads: visibleReads,
            unreadCount: reads[currentUserID]?.unreadMessages ?? 0, policy: policy, cursors: cursors)
    }
}
