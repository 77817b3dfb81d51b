/// A position in a channel's message log: the `seq` of a message, 0 before the first.
public typealias Seq = Int64

/// Which of a member's two cursors moved.
public enum CursorKind: Int, Sendable, Codable, CaseIterable {
    case delivered = 0
    case read = 1
}

/// One member's two cursors into a channel's message log (a read state: docs/concepts.md, "Cursors and the read state").
public struct Cursors: Sendable, Equatable, Hashable, Codable {
    /// Every message with `seq <= read` is read by the member.
    public var read: Seq
    /// Every message with `seq <= delivered` reached one of the member's devices.
    public var delivered: Seq

    public init(read: Seq, delivered: Seq) {
        self.read = read
        self.delivered = delivered
    }

    /// The cursors of a member who joins when `newest` is the newest message (R5:
    /// they have received and read everything already there).
    public static func joining(newest: Seq) -> Cursors { Cursors(read: newest, delivered: newest) }
}

/// A change of one cursor, as the receipt log records it.
public struct CursorMove: Sendable, Equatable, Hashable {
    public var kind: CursorKind
    public var from: Seq
    public var to: Seq

    public init(kind: CursorKind, from: Seq, to: Seq) {
        self.kind = kind
        self.from = from
        self.to = to
    }
}

/// The result of applying a rule: the new cursors and the moves that got there
/// (empty when nothing changed, in which case no event is sent: R2).
public struct CursorUpdate: Sendable, Equatable {
    public var cursors: Cursors
    public var moves: [CursorMove]

    public var changed: Bool { !moves.isEmpty }
    public func moved(_ kind: CursorKind) -> Bool { moves.contains { $0.kind == kind } }
}

/// The receipt rules R1–R4 as pure functions over cursors. The server and the
/// client SDK both call these; nothing else decides how a cursor moves.
public enum ReceiptRules {
    /// R1, R2, R3: read up to and including `target` (clamped to `newest`); also
    /// delivers up to there. Never moves a cursor back.
    public static func markRead(_ cursors: Cursors, upTo target: Seq, newest: Seq) -> CursorUpdate {
        let target = min(max(target, 0), newest)
        var next = cursors
        var moves: [CursorMove] = []
        if target > cursors.delivered {
            moves.append(CursorMove(kind: .delivered, from: cursors.delivered, to: target))
            next.delivered = target
        }
        if target > cursors.read {
            moves.append(CursorMove(kind: .read, from: cursors.read, to: target))
            next.read = target
        }
        return CursorUpdate(cursors: next, moves: moves)
    }

    /// R2: delivered up to and including `target` (clamped to `newest`); never back.
    public static func markDelivered(_ cursors: Cursors, upTo target: Seq, newest: Seq) -> CursorUpdate {
        let target = min(max(target, 0), newest)
        guard target > cursors.delivered else { return CursorUpdate(cursors: cursors, moves: []) }
        var next = cursors
        next.delivered = target
        return CursorUpdate(cursors: next, moves: [CursorMove(kind: .delivered, from: cursors.delivered, to: target)])
    }

    /// Mark unread from the message at `seq`: the read cursor moves to just before
    /// it. The only move that goes back (R2); it never moves the cursor forward,
    /// and the delivered cursor stays where it is.
    public static func markUnread(_ cursors: Cursors, from seq: Seq) -> CursorUpdate {
        let target = max(seq - 1, 0)
        guard target < cursors.read else { return CursorUpdate(cursors: cursors, moves: []) }
        var next = cursors
        next.read = target
        return CursorUpdate(cursors: next, moves: [CursorMove(kind: .read, from: cursors.read, to: target)])
    }

    /// R4: the author of the message at `seq` has read (and received) up to it.
    public static func sent(_ cursors: Cursors, seq: Seq) -> CursorUpdate {
        markRead(cursors, upTo: seq, newest: seq)
    }
}
