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

/// When a member's cursor reached a message, as far as a receipt log that may
/// have been pruned still tells (`ReceiptRules.reached`).
public struct ReachedTime: Sendable, Equatable {
    /// Microseconds since 1970.
    public var at: Int64
    /// True when `at` is the time of the move that reached the message; false
    /// when that move was pruned and `at` is only an upper bound: the cursor
    /// had reached the message by then.
    public var exact: Bool

    public init(at: Int64, exact: Bool) {
        self.at = at
        self.exact = exact
    }
}

extension ReceiptRules {
    /// When the cursor reached the message at `seq`, from a receipt log whose
    /// moves before `prunedBefore` may have been deleted (nil: never pruned).
    /// Only for a member whose cursor is at or past `seq` now.
    ///
    /// Pruning deletes the oldest moves, so what is left of a member's moves is
    /// the newest part of them. The time found in it (`reachedAt` over what is
    /// left) is the true one when the move that reached the message must still
    /// be there: the log was never pruned; or what is left holds a move that
    /// left the cursor before `seq` (so the move after it is the one that
    /// reached it); or the move happened at or after `since` ≥ `prunedBefore`,
    /// where `since` is the later of the message's creation and the member's
    /// join (no cursor passes a message before both). Otherwise the time found
    /// is a later move at or past `seq`, an upper bound; and when none is left,
    /// the cursor's own time (`cursorAt`, its latest move) is.
    ///
    /// - Parameters:
    ///   - moves: what is left of the member's moves of one kind, in log order.
    ///   - since: the later of the message's creation and the member's join (microseconds).
    ///   - prunedBefore: moves older than this may be gone; nil when the log was never pruned.
    ///   - cursorAt: the time of the cursor's latest move.
    public static func reached(
        _ seq: Seq, moves: some Sequence<LoggedMove>, since: Int64, prunedBefore: Int64?, cursorAt: Int64
    ) -> ReachedTime {
        var logged: Int64?
        var anchored = false
        for move in moves {
            if move.seq >= seq {
                if logged == nil { logged = move.at }
            } else {
                logged = nil
                anchored = true
            }
        }
        return reached(logged: logged, anchored: anchored, since: since, prunedBefore: prunedBefore, cursorAt: cursorAt)
    }

    /// `reached(_:moves:since:prunedBefore:cursorAt:)` from what a store's query
    /// found: `logged`, the first move at or past the message after the last
    /// move before it (`reachedAt` over what is left), and `anchored`, whether
    /// what is left holds a move before it.
    public static func reached(
        logged: Int64?, anchored: Bool, since: Int64, prunedBefore: Int64?, cursorAt: Int64
    ) -> ReachedTime {
        guard let logged else { return ReachedTime(at: cursorAt, exact: false) }
        let complete = prunedBefore.map { anchored || since >= $0 } ?? true
        return ReachedTime(at: logged, exact: complete)
    }
}
