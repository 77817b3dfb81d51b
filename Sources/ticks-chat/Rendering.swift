import Foundation
import TicksClient

/// How ticks-chat writes a channel as lines of text: pure functions, so the
/// screen and the plain log print the same thing.
struct Renderer {
    var colors: Bool
    var width: Int = 100

    static let blue = "\u{1B}[94m"
    static let red = "\u{1B}[91m"
    static let dim = "\u{1B}[2m"
    static let reset = "\u{1B}[0m"

    func paint(_ text: String, _ color: String) -> String {
        colors ? color + text + Self.reset : text
    }

    /// `[3] 12:00:01 alice: hello  ✓✓ 2`, the indicator on own messages only.
    func line(number: Int, message: ChatMessage, in channel: ChatChannel) -> String {
        let time = Self.clock.string(from: message.createdAt)
        var line = "[\(number)] \(time) \(message.author.displayName): \(message.text)"
        if message.isPlayable {
            // R14: a voice note or video, with who played it (as this user may know).
            let kind = Self.playableKind(message)
            line += message.text.isEmpty ? "(\(kind))" : " (\(kind))"
            line += message.isPlayed
                ? "  " + paint("▶ played" + (message.playedCount > 1 ? " \(message.playedCount)" : ""), Self.blue)
                : message.isSentByCurrentUser ? "" : "  " + paint("▶ /play \(number)", Self.dim)
        }
        let indicator = channel.readIndicator(for: message)
        switch indicator.state {
        case .hidden:
            break
        case .read:
            line += "  " + paint(indicator.symbol, Self.blue)
            if let count = indicator.readCount { line += " \(count)" }
            if indicator.isReadByEveryone { line += " " + paint("everyone", Self.blue) }
        case .failed:
            line += "  " + paint(indicator.symbol, Self.red) + " (type /resend \(number))"
        default:
            line += "  " + indicator.symbol
        }
        return line
    }

    /// `voice note`, `audio` or `video`: the first playable attachment's type.
    static func playableKind(_ message: ChatMessage) -> String {
        for case .object(let fields) in message.attachments {
            guard case .string(let type)? = fields["type"] else { continue }
            switch type {
            case "voiceRecording": return "voice note"
            case "audio", "video": return type
            default: continue
            }
        }
        return "media"
    }

    func lines(of channel: ChatChannel) -> [String] {
        channel.messages.enumerated().map { line(number: $0.offset + 1, message: $0.element, in: channel) }
    }

    /// `[2] Bob (3)  12:00:01 Bob: see you there  ✓✓`: a channel in the list,
    /// its unread badge, and its newest message with the own message's ticks.
    func line(number: Int, summary: ChatChannelSummary, userID: String) -> String {
        var line = "[\(number)] \(summary.displayName(currentUserID: userID))"
        if summary.unreadCount > 0 { line += " " + paint("(\(summary.unreadCount))", Self.blue) }
        guard let message = summary.lastMessage else { return line + "  (no messages)" }
        let time = Self.clock.string(from: message.createdAt)
        let text = message.isDeleted ? "(deleted)" : message.text
        line += "  \(time) \(message.author.displayName): \(text)"
        switch message.deliveryStatus {
        case .pending?: line += "  …"
        case .failed?: line += "  " + paint("!", Self.red)
        case .sent?: line += "  ✓"
        case .delivered?: line += "  ✓✓"
        case .read?: line += "  " + paint("✓✓", Self.blue)
        case nil: break
        }
        return line
    }

    func lines(of list: ChatChannelList, userID: String) -> [String] {
        var lines = list.channels.enumerated().map { line(number: $0.offset + 1, summary: $0.element, userID: userID) }
        if list.hasMore { lines.append(paint("… more: type /more", Self.dim)) }
        if list.isLoaded, list.channels.isEmpty { lines.append("no channels yet") }
        return lines
    }

    /// `3 unread in 2 channels`, for the header.
    func totals(_ totals: ChatUnreadTotals) -> String {
        totals.totalUnreadCount == 0
            ? "no unread"
            : "\(totals.totalUnreadCount) unread in \(totals.unreadChannels) channel\(totals.unreadChannels == 1 ? "" : "s")"
    }

    func status(_ status: ConnectionStatus) -> String {
        switch status {
        case .connected: return "connected"
        case .connecting: return "connecting…"
        case .disconnected: return "offline, retrying"
        case .refused(let error): return "refused: \(error)"
        }
    }

    /// Who read and who only received a message, with exact times (or, where
    /// the server pruned its receipt log, the time by which it had happened).
    func receipts(_ receipts: MessageReceipts, number: Int) -> [String] {
        let everyone = receipts.readByAll ? ", read by everyone" : receipts.deliveredToAll ? ", delivered to everyone" : ""
        var lines = [
            "receipts of [\(number)]: read by \(receipts.readCount), delivered to \(receipts.deliveredCount)\(everyone)"
        ]
        for receipt in receipts.readBy {
            lines.append("  read by \(receipt.user.displayName) \(Self.when(receipt.readAt, exact: receipt.readAtIsExact))")
        }
        for receipt in receipts.deliveredOnlyTo {
            lines.append(
                "  delivered to \(receipt.user.displayName) \(Self.when(receipt.deliveredAt, exact: receipt.deliveredAtIsExact))")
        }
        if receipts.playedCount > 0 { lines.append("  played by \(receipts.playedCount)") }
        if receipts.receipts.isEmpty { lines.append("  nobody has received it yet") }
        return lines
    }

    /// `/why`: the channel's unread count explained, each message by its
    /// number in brackets when it is on screen, else by its id.
    func unread(_ explanation: UnreadExplanation, numbers: [String: Int]) -> [String] {
        let drift = explanation.isConsistent ? "" : " — drifted: the messages give \(explanation.counted)"
        var lines = ["unread \(explanation.unreadCount)\(drift)"]
        if let lastRead = explanation.lastRead {
            lines.append("  read up to \(explanation.lastReadMessageId ?? "the start"), \(Self.exact(lastRead))")
        }
        for entry in explanation.messages {
            let name = numbers[entry.messageId].map { "[\($0)]" } ?? entry.messageId
            let why =
                switch entry.rule {
                case .counted: "counted"
                case .own: "not counted: your own"
                case .deleted: "not counted: deleted"
                case .threadOnly: "not counted: a reply in its thread"
                }
            lines.append("  \(name) \(why)")
        }
        if explanation.messages.isEmpty { lines.append("  nothing after the read cursor") }
        return lines
    }

    static let clock: DateFormatter = {
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm:ss"
        return formatter
    }()

    /// `2026-11-22 20:23:01.662518`: local time, to the microsecond the server keeps.
    static func exact(_ date: Date?) -> String {
        guard let date else { return "?" }
        let seconds = date.timeIntervalSince1970.rounded(.down)
        let micros = Int(((date.timeIntervalSince1970 - seconds) * 1_000_000).rounded())
        let whole = Date(timeIntervalSince1970: seconds)
        let fraction = String(min(micros, 999_999))
        return day.string(from: whole) + "." + String(repeating: "0", count: 6 - fraction.count) + fraction
    }

    /// `at 2026-11-22 20:23:01.662518`, or `by 2026-11-22 20:24` when the time
    /// is only an upper bound (rounded up to the minute, so it stays one).
    static func when(_ date: Date?, exact: Bool) -> String {
        guard !exact, let date else { return "at \(Self.exact(date))" }
        return "by " + minute.string(from: Date(timeIntervalSince1970: (date.timeIntervalSince1970 / 60).rounded(.up) * 60))
    }

    static let minute: DateFormatter = {
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyy-MM-dd HH:mm"
        return formatter
    }()

    static let day: DateFormatter = {
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return formatter
    }()
}
