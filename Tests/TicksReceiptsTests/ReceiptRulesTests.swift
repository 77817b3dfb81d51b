import Testing
import TicksReceipts

@Suite("Cursor rules R1–R5")
struct CursorRuleTests {
    @Test("R1: marking read up to M also marks delivered up to M")
    func readImpliesDelivered() {
        let update = ReceiptRules.markRead(Cursors(read: 0, delivered: 0), upTo: 3, newest: 5)
        #expect(update.cursors == Cursors(read: 3, delivered: 3))
        #expect(update.moves == [CursorMove(kind: .delivered, from: 0, to: 3), CursorMove(kind: .read, from: 0, to: 3)])
    }

    @Test("R1: read never passes delivered, delivered never passes the newest message")
    func orderHolds() {
        let read = ReceiptRules.markRead(Cursors(read: 1, delivered: 4), upTo: 3, newest: 5)
        #expect(read.cursors == Cursors(read: 3, delivered: 4))
        #expect(read.moves == [CursorMove(kind: .read, from: 1, to: 3)])
        let beyond = ReceiptRules.markDelivered(Cursors(read: 0, delivered: 0), upTo: 99, newest: 5)
        #expect(beyond.cursors.delivered == 5)
        let readBeyond = ReceiptRules.markRead(Cursors(read: 0, delivered: 0), upTo: 99, newest: 5)
        #expect(readBeyond.cursors == Cursors(read: 5, delivered: 5))
    }

    @Test("R2: an older or equal target changes nothing", arguments: [Seq(1), 2, 3])
    func monotonic(target: Seq) {
        let start = Cursors(read: 3, delivered: 3)
        #expect(!ReceiptRules.markRead(start, upTo: target, newest: 5).changed)
        #expect(!ReceiptRules.markDelivered(start, upTo: target, newest: 5).changed)
        #expect(ReceiptRules.markRead(start, upTo: target, newest: 5).cursors == start)
    }

    @Test("R2: only mark unread moves the read cursor back, and only back")
    func unreadMovesBack() {
        let start = Cursors(read: 4, delivered: 5)
        let back = ReceiptRules.markUnread(start, from: 2)
        #expect(back.cursors == Cursors(read: 1, delivered: 5))
        #expect(back.moves == [CursorMove(kind: .read, from: 4, to: 1)])
        // Marking unread a message that is already unread does not read the ones before it.
        #expect(!ReceiptRules.markUnread(Cursors(read: 1, delivered: 5), from: 4).changed)
        #expect(ReceiptRules.markUnread(start, from: 1).cursors.read == 0)
    }

    @Test("R3: up to and including M; without M, up to the newest")
    func upToAndIncluding() {
        #expect(ReceiptRules.markRead(Cursors(read: 0, delivered: 0), upTo: 2, newest: 4).cursors.read == 2)
        #expect(ReceiptRules.markRead(Cursors(read: 0, delivered: 0), upTo: 4, newest: 4).cursors.read == 4)
    }

    @Test("R4: sending moves the sender's cursors to the message")
    func ownMessage() {
        let update = ReceiptRules.sent(Cursors(read: 1, delivered: 2), seq: 6)
        #expect(update.cursors == Cursors(read: 6, delivered: 6))
    }

    @Test("R5: a new member has received and read everything already there")
    func joining() {
        #expect(Cursors.joining(newest: 7) == Cursors(read: 7, delivered: 7))
        #expect(Cursors.joining(newest: 0) == Cursors(read: 0, delivered: 0))
    }
}

@Suite("Unread counts R4, R7")
struct UnreadTests {
    let log = [
        LogEntry(seq: 1, authorID: "bob"), LogEntry(seq: 2, authorID: "alice"), LogEntry(seq: 3, authorID: "bob"),
        LogEntry(seq: 4, authorID: "alice"), LogEntry(seq: 5, authorID: "carol"),
    ]

    @Test("R7: messages after the read cursor not sent by the member")
    func counts() {
        #expect(ReceiptRules.unread(in: log, for: "alice", read: 0) == UnreadSummary(count: 3, firstUnreadSeq: 1))
        #expect(ReceiptRules.unread(in: log, for: "alice", read: 1) == UnreadSummary(count: 2, firstUnreadSeq: 3))
        #expect(ReceiptRules.unread(in: log, for: "bob", read: 3) == UnreadSummary(count: 2, firstUnreadSeq: 4))
        #expect(ReceiptRules.unread(in: log, for: "carol", read: 5) == UnreadSummary(count: 0, firstUnreadSeq: nil))
    }

    @Test("R4: own messages are never unread, even after the read cursor")
    func ownNeverUnread() {
        #expect(!ReceiptRules.isUnread(LogEntry(seq: 9, authorID: "alice"), for: "alice", read: 0))
        #expect(ReceiptRules.isUnread(LogEntry(seq: 9, authorID: "bob"), for: "alice", read: 0))
        #expect(ReceiptRules.unread(in: log.reversed(), for: "bob", read: 0).firstUnreadSeq == 2)
    }
}

@Suite("Per-message receipt times from the log")
struct ReceiptLogTests {
    func move(_ id: Int64, _ seq: Seq, _ at: Int64) -> LoggedMove { LoggedMove(id: id, kind: .read, seq: seq, at: at) }

    @Test("the first move at or past M is when M was reached")
    func firstReach() {
        let moves = [move(1, 2, 100), move(2, 5, 200), move(3, 9, 300)]
        #expect(ReceiptRules.reachedAt(1, moves: moves) == 100)
        #expect(ReceiptRules.reachedAt(2, moves: moves) == 100)
        #expect(ReceiptRules.reachedAt(3, moves: moves) == 200)
        #expect(ReceiptRules.reachedAt(9, moves: moves) == 300)
        #expect(ReceiptRules.reachedAt(10, moves: moves) == nil)
        #expect(ReceiptRules.reachedAt(1, moves: []) == nil)
    }

    @Test("after mark unread, M is unread; reading again gives the new time")
    func unreadThenReadAgain() {
        let unread = [move(1, 5, 100), move(2, 2, 200)]
        #expect(ReceiptRules.reachedAt(4, moves: unread) == nil)
        #expect(ReceiptRules.reachedAt(2, moves: unread) == 100)
        let again = unread + [move(3, 6, 300)]
        #expect(ReceiptRules.reachedAt(4, moves: again) == 300)
        #expect(ReceiptRules.reachedAt(2, moves: again) == 100)
    }

    @Test("a pruned log: the time is exact while the move that reached M is surely kept, else an upper bound")
    func prunedLog() {
        // Moves to 2 at 100, to 5 at 200, back to 1 at 300, to 6 at 400; pruned before 250.
        let kept = [move(3, 1, 300), move(4, 6, 400)]
        // M = 3: the kept move to 1 left the cursor before it, so the move to 6 is the one that reached it.
        #expect(ReceiptRules.reached(3, moves: kept, since: 0, prunedBefore: 250, cursorAt: 400) == .init(at: 400, exact: true))
        // M = 1: reached at 100 (pruned); the first kept move at or past it is only an upper bound.
        #expect(ReceiptRules.reached(1, moves: kept, since: 0, prunedBefore: 250, cursorAt: 400) == .init(at: 300, exact: false))
        // Unless M came after the cutoff: no cursor passed it before it was sent.
        #expect(ReceiptRules.reached(1, moves: kept, since: 260, prunedBefore: 250, cursorAt: 400) == .init(at: 300, exact: true))
        // Nothing kept: the cursor's own time.
        #expect(ReceiptRules.reached(1, moves: [], since: 0, prunedBefore: 250, cursorAt: 400) == .init(at: 400, exact: false))
        // Never pruned: reachedAt, exact.
        #expect(ReceiptRules.reached(1, moves: [move(1, 2, 100)], since: 0, prunedBefore: nil, cursorAt: 100) == .init(at: 100, exact: true))
    }

    @Test("random logs pruned at any time: an exact time is the true one, an upper bound is never earlier")
    func prunedLogsAgreeWithTheWholeLog() {
        var state: UInt64 = 0x5EED
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        var exact = 0
        var bounds = 0
        for _ in 0..<500 {
            // A member's moves of one kind: forward mostly, sometimes back (mark unread).
            var moves: [LoggedMove] = []
            var seq: Seq = 0
            var at: Int64 = 1_000
            for id in 1...Int64(1 + next(12)) {
                seq = next(4) == 0 ? Seq(next(Int(seq) + 1)) : seq + Seq(1 + next(3))
                at += Int64(1 + next(50))
                moves.append(move(id, seq, at))
            }
            let cursorAt = moves.last!.at
            for target in 1...max(seq, 1) where target <= seq {
                guard let truth = ReceiptRules.reachedAt(target, moves: moves) else { continue }
                // The message was sent before any move first passed it.
                let first = moves.first { $0.seq >= target }!.at
                let sent = Int64(next(Int(first - 999)) + 999)
                for cutoff in stride(from: Int64(1_000), through: at + 1, by: 7) {
                    let kept = moves.filter { $0.at >= cutoff }
                    let found = ReceiptRules.reached(
                        target, moves: kept, since: sent, prunedBefore: cutoff, cursorAt: cursorAt)
                    if found.exact {
                        exact += 1
                        #expect(found.at == truth, "\(moves) \(target) \(cutoff)")
                    } else {
                        bounds += 1
                        #expect(found.at >= truth, "\(moves) \(target) \(cutoff)")
                        #expect(found.at <= cursorAt)
                    }
                }
            }
        }
        #expect(exact > 1000 && bounds > 1000)
    }
}

@Suite("Delivery status as the sender sees it")
struct DeliveryStatusTests {
    let on = ReceiptFeatures(readEvents: true, deliveryEvents: true)

    @Test("pending and failed come from the local send state")
    func local() {
        #expect(ReceiptRules.status(.pending, others: [], features: on) == .pending)
        #expect(ReceiptRules.status(.failed, others: [], features: on) == .failed)
    }

    @Test("sent → delivered → read as other members' cursors pass the message")
    func transitions() {
        let message = LocalSendState.stored(seq: 3)
        #expect(ReceiptRules.status(message, others: [Cursors(read: 2, delivered: 2)], features: on) == .sent)
        #expect(ReceiptRules.status(message, others: [Cursors(read: 2, delivered: 3)], features: on) == .delivered)
        #expect(ReceiptRules.status(message, others: [Cursors(read: 3, delivered: 3)], features: on) == .read)
    }

    @Test("R6: when the only reader is removed, read goes back to sent or delivered")
    func removedReader() {
        let message = LocalSendState.stored(seq: 3)
        let reader = Cursors(read: 3, delivered: 3)
        let receiver = Cursors(read: 0, delivered: 3)
        let idle = Cursors(read: 0, delivered: 0)
        #expect(ReceiptRules.status(message, others: [reader, idle], features: on) == .read)
        #expect(ReceiptRules.status(message, others: [idle], features: on) == .sent)
        #expect(ReceiptRules.status(message, others: [reader, receiver], features: on) == .read)
        #expect(ReceiptRules.status(message, others: [receiver], features: on) == .delivered)
    }

    @Test("R8: no indicator when read events are off")
    func readEventsOff() {
        let off = ReceiptFeatures(readEvents: false, deliveryEvents: true)
        #expect(ReceiptRules.status(.stored(seq: 1), others: [Cursors(read: 1, delivered: 1)], features: off) == nil)
    }

    @Test("R9: never delivered when delivery events are off")
    func deliveryEventsOff() {
        let noDelivery = ReceiptFeatures(readEvents: true, deliveryEvents: false)
        let status = ReceiptRules.status(.stored(seq: 2), others: [Cursors(read: 0, delivered: 5)], features: noDelivery)
        #expect(status == .sent)
    }

    @Test("the all-members policy waits for every other member")
    func allMembers() {
        let message = LocalSendState.stored(seq: 2)
        let others = [Cursors(read: 2, delivered: 2), Cursors(read: 0, delivered: 2), Cursors(read: 0, delivered: 1)]
        #expect(ReceiptRules.status(message, others: others, features: on, policy: .anyMember) == .read)
        #expect(ReceiptRules.status(message, others: others, features: on, policy: .allMembers) == .sent)
        #expect(ReceiptRules.status(message, others: Array(others.prefix(2)), features: on, policy: .allMembers) == .delivered)
    }

    @Test("read and delivered counts")
    func counts() {
        let others = [Cursors(read: 3, delivered: 3), Cursors(read: 1, delivered: 4), Cursors(read: 0, delivered: 0)]
        #expect(ReceiptRules.readCount(3, others: others) == 1)
        #expect(ReceiptRules.deliveredCount(3, others: others) == 2)
    }
}
