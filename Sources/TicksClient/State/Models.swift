import Foundation
import TicksProtocol
import TicksReceipts

/// The status of an own message as its sender sees it: pending, failed, sent
/// (✓), delivered (✓✓) or read (blue ✓✓). The diagram in docs/concepts.md ("Message status").
public typealias DeliveryStatus = TicksReceipts.DeliveryStatus
/// When a group message counts as delivered or read: `.anyMember` (Stream,
/// the default) or `.allMembers` (WhatsApp's group ticks).
public typealias GroupPolicy = TicksReceipts.GroupPolicy

/// A channel's identity, `type:id` (Stream's `cid`).
public typealias ChannelID = TicksProtocol.ChannelID

/// A user as the app shows them.
public struct ChatUser: Sendable, Hashable, Identifiable {
    public var id: String
    public var name: String?
    public var imageURL: URL?
    /// Whether others may see this user's reads (their privacy settings, R10).
    public var sharesReadReceipts: Bool
    /// Whether others may see that this user's devices received messages.
    public var sharesDeliveryReceipts: Bool

    public init(
        id: String, name: String? = nil, imageURL: URL? = nil, sharesReadReceipts: Bool = true,
        sharesDeliveryReceipts: Bool = true
    ) {
        self.id = id
        self.name = name
        self.imageURL = imageURL
        self.sharesReadReceipts = sharesReadReceipts
        self.sharesDeliveryReceipts = sharesDeliveryReceipts
    }

    init(_ user: User) {
        self.init(
            id: user.id, name: user.name, imageURL: user.image.flatMap(URL.init(string:)),
            sharesReadReceipts: user.sharesReadReceipts, sharesDeliveryReceipts: user.sharesDeliveryReceipts)
    }

    /// The name, or the id when there is none.
    public var displayName: String { name.flatMap { $0.isEmpty ? nil : $0 } ?? id }

    /// Up to two letters for an avatar placeholder: "AL" for "Alice Liddell", "B" for "bob".
    public var initials: String {
        let words = displayName.split(whereSeparator: { $0 == " " || $0 == "-" || $0 == "_" })
        return words.prefix(2).compactMap(\.first).map { String($0).uppercased() }.joined()
    }
}

/// Where an own message stands before the server has stored it.
public enum LocalMessageState: Sendable, Equatable {
    /// In the outbox, being sent or waiting to be.
    case pending
    /// The retry budget ran out, or the server refused it; `ChatClient.resend(messageId:)` tries again.
    case failed(reason: String)
}

/// A message as the app shows it.
public struct ChatMessage: Sendable, Equatable, Identifiable {
    public var id: String
    public var cid: ChannelID
    public var text: String
    public var author: ChatUser
    public var createdAt: Date
    /// Fields the app added to the message (Stream's custom data).
    public var extraData: [String: JSONValue]
    public var isSentByCurrentUser: Bool
    /// Set while the message is only in the local outbox; nil once the server has it.
    public var localState: LocalMessageState?
    /// The status of an own message (docs/concepts.md, "Message status"); nil for others' messages and
    /// when the channel type has read events off (R8).
    public var deliveryStatus: DeliveryStatus?
    /// How many members other than the author have read it.
    public var readCount: Int
    /// How many members other than the author have received it (reading counts).
    public var deliveredCount: Int
    /// Deleted (its text may be gone): show a placeholder. Its receipts stay
    /// as they were, but it is never unread.
    public var isDeleted = false
    /// When the text was last edited; editing never changes receipts.
    public var editedAt: Date? = nil
    /// Replies in its thread.
    public var replyCount = 0
    /// The thread's parent, for a reply.
    public var parentId: String? = nil
    /// An own message every other member has read, as the server says (R13:
    /// it knows every member, loaded or not; private readers count by delivery).
    public var isReadByAll = false
    /// An own message every other member has received (R13).
    public var isDeliveredToAll = false
    /// Stream's attachments, as sent (`type`, `asset_url`, …).
    public var attachments: [JSONValue] = []
    /// The members who played it (a voice note or video, R14), as this user may know; sorted.
    public var playedBy: [String] = []
    /// Where the message is in the loaded part of the channel (1 = oldest
    /// loaded); nil while it is only local.
    let position: Seq?
}

extension ChatMessage {
    /// Whether it has an audio or video attachment a member may mark played (R14).
    public var isPlayable: Bool { Message.isPlayable(attachments) }
    /// Whether any member other than the author played it.
    public var isPlayed: Bool { playedCount > 0 }
    /// How many members other than the author played it.
    public var playedCount: Int { playedBy.count { $0 != author.id } }
}

/// One member's read state, as far as the current user may see it (R8, R10).
public struct ChatChannelRead: Sendable, Equatable {
    public var user: ChatUser
    /// When the read cursor last moved.
    public var lastReadAt: Date?
    public var lastReadMessageId: String?
    /// Only for the current user's own read state.
    public var unreadMessagesCount: Int?
    /// When the delivered cursor last moved.
    public var lastDeliveredAt: Date?
    public var lastDeliveredMessageId: String?
}

/// What a channel type turns on (its `config`).
public struct ChatChannelConfig: Sendable, Equatable {
    public var name: String
    /// Off: nobody sees anyone's reads and read indicators are hidden (R8).
    public var readEvents: Bool
    /// Off: no delivered state anywhere (R9).
    public var deliveryEvents: Bool
    public var maxMessageLength: Int

    init(_ config: ChannelConfig) {
        name = config.name
        readEvents = config.readEvents
        deliveryEvents = config.deliveryEvents
        maxMessageLength = config.maxMessageLength
    }

    public init(name: String, readEvents: Bool, deliveryEvents: Bool, maxMessageLength: Int = 5000) {
        self.name = name
        self.readEvents = readEvents
        self.deliveryEvents = deliveryEvents
        self.maxMessageLength = maxMessageLength
    }
}

/// A received receipt: a member's device got a message, or the member read it
/// (CometChat's `onMessagesDelivered` / `onMessagesRead`). Receipts cover every
/// message up to and including `messageId` (R3).
public struct MessageReceipt: Sendable, Equatable {
    public enum ReceiptType: String, Sendable, Equatable {
        case delivered
        case read
    }

    public var messageId: String
    public var cid: ChannelID
    public var user: ChatUser
    public var receiptType: ReceiptType
    public var deliveredAt: Date?
    public var readAt: Date?
    /// False when the server's receipt log no longer holds the move that
    /// delivered the message (`ticks serve --receipt-log-retention`):
    /// `deliveredAt` is then an upper bound, the time by which it had been
    /// delivered. Show it as "delivered by 14:02", not "at 14:02:31".
    public var deliveredAtIsExact = true
    /// The same for `readAt`: false means "read by then" (an upper bound), not the moment it was read.
    public var readAtIsExact = true
}

/// Every member's receipt for one message (`GET /messages/{id}/receipts`):
/// exact times, or upper bounds where the server pruned its receipt log
/// (`MessageReceipt.readAtIsExact`).
public struct MessageReceipts: Sendable, Equatable {
    /// Most recent first; `.read` entries also carry when the message was delivered.
    public var receipts: [MessageReceipt]
    /// How many members have read it.
    public var readCount: Int
    /// How many members' devices have it, those who read it included (R1).
    public var deliveredCount: Int
    /// Every member but the author has read it, received it, as the others may know (R13).
    public var readByAll = false
    public var deliveredToAll = false
    /// How many members played it (R14), as the caller may know.
    public var playedCount = 0

    /// The members who read it, most recent first.
    public var readBy: [MessageReceipt] { receipts.filter { $0.receiptType == .read } }
    /// The members whose devices have it but who have not read it.
    public var deliveredOnlyTo: [MessageReceipt] { receipts.filter { $0.receiptType == .delivered } }
}

/// The state of the client's WebSocket.
public enum ConnectionStatus: Sendable, Equatable {
    case disconnected
    case connecting
    case connected(connectionID: String)
    /// The server refused the credentials; the client stops trying.
    case refused(TicksClientError)

    public var isConnected: Bool {
        if case .connected = self { return true }
        return false
    }
}
