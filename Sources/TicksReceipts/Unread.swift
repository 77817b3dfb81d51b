/// Who wrote the message at a position of the log, and whether it still
/// counts: enough to count unread messages.
public struct LogEntry: Sendable, Equatable {
    public var seq: Seq
    public var authorID: String
    /// False once the message is deleted: a deleted message is never unread.
    public var counts: Bool

    public init(seq: Seq, authorID: String, counts: Bool = true) {
        self.seq = seq
        self.authorID = authorID
        self.counts = counts
    }
}

public struct UnreadSummary: Sendable, Equatable {
    /// R7: messages after the read cursor not sent by the member.
    public var count: Int
    /// The first of them.
    public var firstUnreadSeq: Seq?

    public init(count: Int, firstUnreadSeq: Seq?) {
        self.count = count
        self.firstUnreadSeq = firstUnreadSeq
    }
}

/// Which part of R7 decided whether a message counts as unread for a member
/// (`GET /unread/explain` names it for each message after the read cursor).
public enum UnreadRule: String, Sendable, Equatable, CaseIterable {
    /// Counted: another member's message after the read cursor.
    case counted
    /// At or before the read cursor (R3).
    case read
    /// The member's own (R4).
    case own
    /// Never counts in the channel: deleted, or a reply shown only in its thread.
    case hidden
}

extension ReceiptRules {
    /// R3, R4, R7: the rule that decides whether the message is unread for
    /// `memberID` with read cursor `read`, checked in this order — read, own,
    /// hidden — so that each message has exactly one.
    public static func unreadRule(_ entry: LogEntry, for memberID: String, read: Seq) -> UnreadRule {
        if entry.seq <= read { return .read }
        if entry.authorID == memberID { return .own }
        return entry.counts ? .counted : .hidden
    }

    /// R4, R7: whether the message is unread for `memberID` with read cursor
    /// `read` — after the cursor, not their own, and not deleted.
    public static func isUnread(_ entry: LogEntry, for memberID: String, read: Seq) -> Bool {
        unreadRule(entry, for: memberID, read: read) == .counted
    }

    /// R7 over a slice of the log (any order).
    public static func unread(in log: some Sequence<LogEntry>, for memberID: String, read: Seq) -> UnreadSummary {
        var count = 0
        var first: Seq?
        for entry in log where isUnread(entry, for: memberID, read: read) {
            count += 1
            if first.map({ entry.seq < $0 }) ?? true { first = entry.seq }
        }
        return UnreadSummary(count: count, firstUnreadSeq: first)
    }
}
