/// The status of a message as its sender sees it (the diagram in docs/concepts.md, "Message status").
public enum DeliveryStatus: String, Sendable, Equatable, Codable {
    case pending
    case failed
    case sent
    case delivered
    case read
}

/// When a group message counts as delivered or read.
public enum GroupPolicy: Sendable, Equatable {
    /// Stream's rule: as soon as any other member has (the default).
    case anyMember
    /// WhatsApp's group ticks: only once every other member has.
    case allMembers
}

/// Where the sender's own copy of the message stands before the server has it.
public enum LocalSendState: Sendable, Equatable {
    case pending
    case failed
    case stored(seq: Seq)
}

/// What a channel type lets clients show.
public struct ReceiptFeatures: Sendable, Equatable {
    public var readEvents: Bool
    public var deliveryEvents: Bool

    public init(readEvents: Bool, deliveryEvents: Bool) {
        self.readEvents = readEvents
        self.deliveryEvents = deliveryEvents
    }
}

extension ReceiptRules {
    /// The status of an own message; `nil` when no indicator is shown (R8: read
    /// events off). `others` are the visible cursors of the other members.
    /// With `.allMembers` and the server's own facts (`allReached`: how far
    /// every other member has read and received the sender's messages, R13),
    /// those decide, not the members a client happens to hold.
    public static func status(
        _ local: LocalSendState, others: [Cursors], features: ReceiptFeatures, policy: GroupPolicy = .anyMember,
        allReached: Cursors? = nil
    ) -> DeliveryStatus? {
        guard features.readEvents else { return nil }
        switch local {
        case .pending: return .pending
        case .failed: return .failed
        case .stored(let seq) where policy == .allMembers && allReached != nil:
            let all = allReached!
            if all.read >= seq { return .read }
            return features.deliveryEvents && hasReceived(seq, all) ? .delivered : .sent
        case .stored(let seq):
            guard !others.isEmpty else { return .sent }
            let satisfied: ((Cursors) -> Bool) -> Bool = { test in
                switch policy {
                case .anyMember: return others.contains(where: test)
                case .allMembers: return others.allSatisfy(test)
                }
            }
            if satisfied({ $0.read >= seq }) { return .read }
            // R9: without delivery events a message is never shown as delivered.
            if features.deliveryEvents && satisfied({ hasReceived(seq, $0) }) { return .delivered }
            return .sent
        }
    }

    /// Whether a member with `cursors` has read the message at `seq`.
    public static func hasRead(_ seq: Seq, _ cursors: Cursors) -> Bool {
        cursors.read >= seq
    }

    /// Whether a member with `cursors` has received the message at `seq` (reading it counts, R1).
    public static func hasReceived(_ seq: Seq, _ cursors: Cursors) -> Bool {
        max(cursors.delivered, cursors.read) >= seq
    }

    /// How many of `others` have read the message at `seq`.
    public static func readCount(_ seq: Seq, others: [Cursors]) -> Int {
        others.count { hasRead(seq, $0) }
    }

    /// How many of `others` have received (or read, R1) the message at `seq`.
    public static func deliveredCount(_ seq: Seq, others: [Cursors]) -> Int {
        others.count { hasReceived(seq, $0) }
    }
}
