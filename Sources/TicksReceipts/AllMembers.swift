/// Read by everyone and delivered to everyone (R13 in docs/receipt-rules.md):
/// a message is read by all when every member but its author counts as
/// having read it, as the others may know it. The server keeps no list per
/// message: it asks the channel's lowest counted cursors (an index), since
/// the lowest of the members other than an author is always one of the two
/// lowest of the channel.
public enum AllMembers {
    /// Where a member stands for "all" of `kind`, as others may know it: nil
    /// when they do not count (they hide what would tell it).
    ///
    /// - A member who shares reads counts by their read cursor.
    /// - Reads hidden (R10): for *read by all* they count through their
    ///   delivered cursor, which others see already — never a read, and not
    ///   at all where the channel type has no delivery events (R9: there a
    ///   delivered cursor moves only with reads).
    /// - Deliveries hidden: for *delivered to all* they count through their
    ///   read cursor when they share reads (R1: read is received).
    ///
    /// The stores index the same expression (`StoreSQL.countedSeq`).
    public static func counted(
        _ kind: CursorKind, _ cursors: Cursors, sharesReads: Bool, sharesDeliveries: Bool, deliveryEvents: Bool
    ) -> Seq? {
        switch kind {
        case .read:
            if sharesReads { return cursors.read }
            return deliveryEvents && sharesDeliveries ? cursors.delivered : nil
        case .delivered:
            if sharesDeliveries { return cursors.delivered }
            return sharesReads ? cursors.read : nil
        }
    }

    /// The newest position every member but `author` has reached, from the
    /// channel's lowest counted positions (lowest first, at least two when
    /// there are two members; nil for a member who does not count); nil when
    /// no member but the author counts — nothing is read by all then.
    public static func threshold(for author: String, lowest: [(userID: String, seq: Seq?)]) -> Seq? {
        lowest.first { $0.userID != author }?.seq
    }

    /// What one member's move made reached by all: messages after `from`
    /// (the mover's counted position before) up to `upTo` by any author
    /// other than the mover and `lowestOther`, and up to `upToForLowest` by
    /// `lowestOther` (the lowest member but the mover, whose own messages
    /// wait only for the others). `lowest` is the channel's lowest counted
    /// positions after the move, lowest first, at least three when there are.
    /// Nil when the move reached nothing new for anyone.
    public struct Reached: Sendable, Equatable {
        public var from: Seq
        public var upTo: Seq
        public var lowestOther: String?
        public var upToForLowest: Seq
    }

    public static func reached(
        by mover: String, from before: Seq?, to after: Seq?, lowest: [(userID: String, seq: Seq?)]
    ) -> Reached? {
        guard let before, let after, after > before else { return nil }
        let others = lowest.filter { $0.userID != mover }
        // A member who does not count holds nobody back: as if at the end.
        let first = others.first.map { ($0.userID, $0.seq ?? Seq.max) }
        let second = others.dropFirst().first.map { $0.seq ?? Seq.max } ?? Seq.max
        let reached = Reached(
            from: before, upTo: min(after, first?.1 ?? Seq.max), lowestOther: first?.0,
            upToForLowest: min(after, second))
        guard reached.upTo > before || reached.upToForLowest > before else { return nil }
        return reached
    }
}
