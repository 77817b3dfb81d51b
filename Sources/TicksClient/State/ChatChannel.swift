import Foundation
import TicksReceipts

/// A channel as the app shows it at one moment: a value, so a UI can keep it
/// and compare it. `ChannelController.updates()` yields a new one on every change.
public struct ChatChannel: Sendable, Equatable {
    public var cid: ChannelID
    /// The user the client is connected as.
    public var currentUserID: String
    /// False until the channel's state is known: loaded from the server, or
    /// kept by the device cache from an earlier run.
    public var isLoaded: Bool
    /// True once the server's state was loaded since the client connected;
    /// false while what shows came from the device cache.
    public var isSynced: Bool
    /// Whether older messages may exist than the loaded ones (`ChannelController.loadOlder()`).
    public var hasOlderMessages: Bool
    /// Nil until loaded.
    public var config: ChatChannelConfig?
    public var members: [ChatUser]
    /// Oldest first: the loaded messages the server has, then the current
    /// user's messages still in the outbox (pending or failed).
    public var messages: [ChatMessage]
    /// The read states the current user may see, their own included.
    public var reads: [ChatChannelRead]
    /// The current user's unread messages in this channel (R7).
    public var unreadCount: Int
    /// The policy `deliveryStatus` was computed with.
    public var policy: GroupPolicy

    /// Each visible member's cursors, in the positions of `messages`.
    let cursors: [String: Cursors]

    public var memberCount: Int { members.count }

    public func message(withID id: String) -> ChatMessage? {
        messages.first { $0.id == id }
    }

    /// The read states of the members other than the author who have read
    /// `message`, most recent first (Stream's `reads(for:)`).
    public func reads(for message: ChatMessage) -> [ChatChannelRead] {
        guard let seq = message.position else { return [] }
        return reads.filter { read in
            read.user.id != message.author.id
                && cursors[read.user.id].map { ReceiptRules.hasRead(seq, $0) } == true
        }.sorted { ($0.lastReadAt ?? .distantPast, $1.user.id) > ($1.lastReadAt ?? .distantPast, $0.user.id) }
    }

    /// The read states of the members other than the author whose devices
    /// received `message` but who have not read it, most recent first (Stream's
    /// `deliveredReads(for:)`). Empty when the channel type has no delivery events (R9).
    public func deliveredReads(for message: ChatMessage) -> [ChatChannelRead] {
        guard let seq = message.position, config?.deliveryEvents != false else { return [] }
        return reads.filter { read in
            guard read.user.id != message.author.id, let cursors = cursors[read.user.id] else { return false }
            return ReceiptRules.hasReceived(seq, cursors) && !ReceiptRules.hasRead(seq, cursors)
        }.sorted {
            ($0.lastDeliveredAt ?? .distantPast, $1.user.id) > ($1.lastDeliveredAt ?? .distantPast, $0.user.id)
        }
    }
}
