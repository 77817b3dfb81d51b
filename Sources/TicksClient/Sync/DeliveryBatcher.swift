/// Collects "delivered up to here" marks per channel for the next
/// `POST /channels/delivered`: only the newest message of each channel counts
/// (delivered up to it covers the ones before), at most `batchSize` channels a
/// call, in the order channels were first marked.
struct DeliveryBatcher: Sendable {
    struct Mark: Sendable, Equatable {
        var cid: ChannelID
        var messageID: String
        /// Microseconds since 1970 (the message's `created_at`), to keep the newest.
        var createdAt: Int64
    }

    let batchSize: Int
    private var marks: [ChannelID: Mark] = [:]
    private var order: [ChannelID] = []

    init(batchSize: Int) {
        self.batchSize = batchSize
    }

    var isEmpty: Bool { order.isEmpty }
    var count: Int { order.count }

    /// Keeps the newer of the waiting mark and this one.
    mutating func add(_ mark: Mark) {
        if let waiting = marks[mark.cid] {
            if mark.createdAt > waiting.createdAt { marks[mark.cid] = mark }
        } else {
            marks[mark.cid] = mark
            order.append(mark.cid)
        }
    }

    /// Takes the next call's worth of marks.
    mutating func takeBatch() -> [Mark] {
        let cids = order.prefix(batchSize)
        order.removeFirst(cids.count)
        return cids.compactMap { marks.removeValue(forKey: $0) }
    }

    /// Puts back marks whose call failed, unless a newer one arrived meanwhile.
    mutating func restore(_ batch: [Mark]) {
        for mark in batch { add(mark) }
    }
}
