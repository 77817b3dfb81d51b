/// One row of the receipt log: a member's cursor of one kind moved to `seq` at `at`.
/// Rows of one member and kind are ordered by `id`.
public struct LoggedMove: Sendable, Equatable {
    public var id: Int64
    public var kind: CursorKind
    public var seq: Seq
    /// Microseconds since 1970.
    public var at: Int64

    public init(id: Int64, kind: CursorKind, seq: Seq, at: Int64) {
        self.id = id
        self.kind = kind
        self.seq = seq
        self.at = at
    }
}

extension ReceiptRules {
    /// When did the cursor reach the message at `seq`, as the cursor stands now?
    ///
    /// The answer is the time of the first move at or past `seq` after the last
    /// move that left the cursor before it (a mark unread can move the read
    /// cursor back; reading again gives a new time). `nil` when the cursor is
    /// before `seq` now. `moves` are one member's moves of one kind, in log order.
    public static func reachedAt(_ seq: Seq, moves: some Sequence<LoggedMove>) -> Int64? {
        var reached: Int64?
        for move in moves {
            if move.seq >= seq {
                if reached == nil { reached = move.at }
            } else {
                reached = nil
            }
        }
        return reached
    }
}
