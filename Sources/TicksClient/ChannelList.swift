import Foundation
import TicksProtocol

/// Which of the current user's channels a channel list shows.
public enum ChannelListFilter: Sendable, Hashable {
    /// Every channel the user is a member of.
    case all
    /// The user's channels of one type.
    case type(String)
    /// The user's channels among these.
    case cids([ChannelID])

    /// Whether a channel of the user's belongs in the list (the client
    /// applies the filter itself to channels it hears of live).
    public func matches(_ cid: ChannelID) -> Bool {
        switch self {
        case .all: true
        case .type(let type): cid.type == type
        case .cids(let cids): cids.contains(cid)
        }
    }
}

/// One key of a channel list's order (the server's `sort`).
public struct ChannelListSort: Sendable, Hashable {
    public typealias Field = ChannelSortField

    /// What it sorts by.
    public var field: Field
    /// Oldest (smallest) first; false, the default, is newest (largest) first.
    public var ascending: Bool

    /// A key, newest first unless `ascending`.
    public init(_ field: Field, ascending: Bool = false) {
        self.field = field
        self.ascending = ascending
    }

    /// The channel with the newest message first: a chat app's list.
    public static let lastMessageAt = ChannelListSort(.lastMessageAt)
}

/// A channel as a channel list shows it: enough for a row (name, newest
/// message with its ticks, unread badge) without loading its messages.
public struct ChatChannelSummary: Sendable, Equatable, Identifiable {
    public var id: ChannelID { cid }
    public var cid: ChannelID
    /// The channel's `name` field, if it has one.
    public var name: String?
    /// The members loaded with the channel (all of them up to the server's page of members).
    public var members: [ChatUser]
    /// How many members the channel has.
    public var memberCount: Int
    /// The newest message, the current user's pending ones included, with its status.
    public var lastMessage: ChatMessage?
    /// When the newest message was sent; nil for a channel without messages.
    public var lastMessageAt: Date?
    /// When the channel was created.
    public var createdAt: Date
    /// When the channel last changed (a message, a member, its data).
    public var updatedAt: Date
    /// The current user's unread messages in the channel (R7).
    public var unreadCount: Int
    /// Its type's receipts settings (hide ticks when `readEvents` is off).
    public var config: ChatChannelConfig?
    /// False while it shows what the device cache kept, before the server confirmed it.
    public var isSynced: Bool

    /// The name to show: the channel's, else the other members' names.
    public func displayName(currentUserID: String) -> String {
        if let name, !name.isEmpty { return name }
        let others = members.filter { $0.id != currentUserID }.map(\.displayName)
        return others.isEmpty ? cid.id : others.joined(separator: ", ")
    }
}

/// A channel list at one moment (`ChannelListController.updates()`).
public struct ChatChannelList: Sendable, Equatable {
    /// In the list's order.
    public var channels: [ChatChannelSummary]
    /// Whether the server may have more channels than those loaded (`loadMore()`).
    public var hasMore: Bool
    /// False until the first page came from the server or the cache.
    public var isLoaded: Bool
    /// The current user's unread messages over all their channels.
    public var totalUnreadCount: Int
    /// How many of the current user's channels have unread messages.
    public var unreadChannels: Int
}

/// A live, paged list of the current user's channels: new channels appear
/// (`notification.added_to_channel`, or a new message in a channel not yet
/// loaded that now sorts among the loaded ones), channels the user leaves or
/// that are deleted go, and every row follows its channel's messages, ticks
/// and unread count. Cheap to copy; every call goes through the client.
public struct ChannelListController: Sendable {
    /// The client the list belongs to.
    public let client: ChatClient
    /// Which of the user's channels it shows.
    public let filter: ChannelListFilter
    /// Its order, key after key.
    public let sort: [ChannelListSort]

    var query: ChannelListQuery { ChannelListQuery(filter: filter, sort: sort) }

    /// The list now.
    public var state: ChatChannelList {
        get async { await client.listState(query) }
    }

    /// The list now, then a new value after every change.
    public func updates() async -> AsyncStream<ChatChannelList> {
        await client.listUpdates(query)
    }

    /// The first page from the server. With the server out of reach, the
    /// channels the device cache kept are shown instead, and the first page
    /// is loaded once the client connects (throws only when nothing is cached).
    public func load() async throws {
        try await client.loadList(query, more: false)
    }

    /// The next page.
    public func loadMore() async throws {
        try await client.loadList(query, more: true)
    }
}

/// What identifies a list: the same filter and order share one.
struct ChannelListQuery: Sendable, Hashable {
    var filter: ChannelListFilter
    var sort: [ChannelListSort]

    /// Whether `a` comes before `b` in this list (ties: the newest channel first, then by cid).
    func inOrder(_ a: ChatChannelSummary, _ b: ChatChannelSummary) -> Bool {
        for key in sort {
            if key.field == .id {
                // Byte order, as the server sorts ids.
                let (x, y) = (Array(a.cid.id.utf8), Array(b.cid.id.utf8))
                if x != y { return key.ascending ? x.lexicographicallyPrecedes(y) : y.lexicographicallyPrecedes(x) }
                continue
            }
            let (x, y) = (Self.value(a, key.field), Self.value(b, key.field))
            if x != y { return key.ascending ? x < y : x > y }
        }
        if a.createdAt != b.createdAt { return a.createdAt > b.createdAt }
        return a.cid.rawValue < b.cid.rawValue
    }

    private static func value(_ summary: ChatChannelSummary, _ field: ChannelListSort.Field) -> Double {
        switch field {
        case .lastMessageAt: (summary.lastMessageAt ?? summary.createdAt).timeIntervalSince1970
        case .lastUpdated: max(summary.lastMessageAt ?? summary.createdAt, summary.updatedAt).timeIntervalSince1970
        case .createdAt: summary.createdAt.timeIntervalSince1970
        case .updatedAt: summary.updatedAt.timeIntervalSince1970
        case .memberCount: Double(summary.memberCount)
        case .id: 0  // compared as text in `inOrder`
        }
    }
}

/// One list's state inside the client.
struct ChannelListState {
    var cids: [ChannelID] = []
    var hasMore = true
    var isLoaded = false
    /// The first page has come from the server since the client connected.
    var isFresh = false
    let broadcast = Broadcast<ChatChannelList>(bufferSize: 16)
}
