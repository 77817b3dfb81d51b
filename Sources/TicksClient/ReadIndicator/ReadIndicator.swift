/// What a UI draws next to an own message: a platform-neutral model of the
/// read indicator (Stream's `ChatMessageDeliveryStatusView`, CometChat's ticks).
public struct ReadIndicator: Sendable, Equatable {
    public enum State: String, Sendable, Equatable {
        /// Nothing is drawn: someone else's message, read events off (R8), or turned off.
        case hidden
        /// A clock: in the outbox.
        case pending
        /// An error mark with a resend action.
        case failed
        /// One grey check.
        case sent
        /// Two grey checks.
        case delivered
        /// Two blue checks.
        case read
    }

    public enum Tint: String, Sendable, Equatable {
        case none
        case grey
        case blue
        case error
    }

    public var state: State
    /// 0, 1 or 2 checks.
    public var checkmarks: Int
    public var tint: Tint
    /// The read count, shown in channels of more than two members once read.
    public var readCount: Int?
    /// The most recent readers, most recent first (avatars).
    public var lastReaders: [ChatUser]
    /// Readers beyond `lastReaders` ("and N more").
    public var moreReadersCount: Int
    /// A text alternative, e.g. "Read by 2", or "Read by everyone".
    public var accessibilityLabel: String
    /// In a group, every other member has read it, as the server says (R13):
    /// WhatsApp's blue ticks, right whatever members are loaded.
    public var isReadByEveryone = false
    /// An own voice note or video that members played (R14, from `message.played`
    /// as this user may see them): WhatsApp's blue microphone.
    public var isPlayed = false
    /// How many members played it (0 when none, or not a voice note or video).
    public var playedCount = 0

    /// "and 2 more", or nil.
    public var moreReadersLabel: String? { moreReadersCount > 0 ? "and \(moreReadersCount) more" : nil }

    /// A terminal rendering: `…`, `!`, `✓`, `✓✓` (blue is left to the caller), or empty.
    public var symbol: String {
        switch state {
        case .hidden: return ""
        case .pending: return "…"
        case .failed: return "!"
        case .sent: return "✓"
        case .delivered, .read: return "✓✓"
        }
    }

    public static let hidden = plain(.hidden, checkmarks: 0, tint: .none, label: "")

    /// An indicator without readers.
    static func plain(_ state: State, checkmarks: Int, tint: Tint, label: String) -> ReadIndicator {
        ReadIndicator(
            state: state, checkmarks: checkmarks, tint: tint, readCount: nil, lastReaders: [], moreReadersCount: 0,
            accessibilityLabel: label)
    }
}

/// How read indicators are built, customisable the way Stream's layout
/// options (remove the indicator) and view factory (your own view) allow.
public struct ReadIndicatorOptions: Sendable {
    /// False removes the indicator everywhere (Stream: removing `.deliveryStatusIndicator`).
    public var isEnabled: Bool
    /// How many readers' avatars to show.
    public var maxReaders: Int
    /// Whether groups show the read count.
    public var showsReadCount: Bool
    /// Your own mapping: gets the default indicator and returns the one to show.
    public var customize: (@Sendable (ReadIndicator, ChatChannel, ChatMessage) -> ReadIndicator)?

    public init(
        isEnabled: Bool = true, maxReaders: Int = 3, showsReadCount: Bool = true,
        customize: (@Sendable (ReadIndicator, ChatChannel, ChatMessage) -> ReadIndicator)? = nil
    ) {
        self.isEnabled = isEnabled
        self.maxReaders = maxReaders
        self.showsReadCount = showsReadCount
        self.customize = customize
    }

    public static let `default` = ReadIndicatorOptions()
}

extension ChatChannel {
    /// The read indicator of `message` in this channel.
    public func readIndicator(for message: ChatMessage, options: ReadIndicatorOptions = .default) -> ReadIndicator {
        var indicator = defaultReadIndicator(for: message, options: options)
        if indicator.state != .hidden, message.isPlayable, message.isPlayed {
            indicator.isPlayed = true
            indicator.playedCount = message.playedCount
            indicator.accessibilityLabel +=
                memberCount > 2 ? ", played by \(message.playedCount)" : ", played"
        }
        return options.customize?(indicator, self, message) ?? indicator
    }

    private func defaultReadIndicator(for message: ChatMessage, options: ReadIndicatorOptions) -> ReadIndicator {
        guard options.isEnabled, message.isSentByCurrentUser, let status = message.deliveryStatus else {
            return .hidden
        }
        switch status {
        case .pending: return .plain(.pending, checkmarks: 0, tint: .grey, label: "Sending")
        case .failed: return .plain(.failed, checkmarks: 0, tint: .error, label: "Not sent")
        case .sent: return .plain(.sent, checkmarks: 1, tint: .grey, label: "Sent")
        case .delivered: return .plain(.delivered, checkmarks: 2, tint: .grey, label: "Delivered")
        case .read:
            let readers = reads(for: message).map(\.user)
            let shown = Array(readers.prefix(max(options.maxReaders, 0)))
            let isGroup = memberCount > 2
            let everyone = isGroup && message.isReadByAll
            return ReadIndicator(
                state: .read, checkmarks: 2, tint: .blue,
                readCount: isGroup && options.showsReadCount ? message.readCount : nil, lastReaders: shown,
                moreReadersCount: max(readers.count - shown.count, 0),
                accessibilityLabel: everyone ? "Read by everyone" : isGroup ? "Read by \(message.readCount)" : "Read",
                isReadByEveryone: everyone)
        }
    }
}
