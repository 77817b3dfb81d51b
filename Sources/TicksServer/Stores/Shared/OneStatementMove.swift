import Foundation
import TicksProtocol
import TicksReceipts

/// One mark read or delivered in a batch of PostgreSQL's `StoreSQL.moves`.
struct BatchedMove: Sendable {
    var kind: CursorKind
    var userID: String
    var channel: ChannelID
    /// Up to this message; nil: up to the newest.
    var messageID: String?
    var at: Timestamp
    var audience: any MoveAudience

    /// The member whose row the move locks: a batch holds each at most once.
    var member: String { "\(channel)/\(userID)" }
}

/// PostgreSQL's batched marks read and delivered (`StoreSQL.moves`), each
/// row decoded into the outcome the step-by-step program gives, and checked
/// against `ReceiptRules`: the cursors the SQL chose must be the rules'; and
/// what the moves made read by all (R13), checked against `AllMembers`.
enum OneStatementMove {
    /// The batch in one round trip: one outcome (or refusal) per move, in order.
    static func program(_ moves: [BatchedMove], schema: SchemaLevel)
        -> StoreProgram<[Result<CursorOutcome?, any Error>]>
    {
        let allMembers = schema.has(.allMembers)
        return Step.rows(StoreSQL.moves(moves, schema: schema)).map { try decode($0, of: moves, allMembers: allMembers) }
    }

    /// The rows of `MovesFunction` for `moves` (`StoreSQL.moves`, or a send's read, `StoreSQL.send`),
    /// decoded and checked: one outcome (or refusal) per move, in order.
    static func decode(_ rows: [any StoreRow], of moves: [BatchedMove], allMembers: Bool) throws
        -> [Result<CursorOutcome?, any Error>]
    {
        guard rows.count >= moves.count else {
            throw StoreError.inconsistent("\(rows.count) rows for a batch of \(moves.count) moves")
        }
        var results = try zip(rows, moves).enumerated().map { index, pair in
            let (row, move) = pair
            guard try row.int(36) == index + 1 else {
                throw StoreError.inconsistent("the moves' rows came out of order")
            }
            return Result { try outcome(row, of: move) }
        }
        var reported: [Int: [(kind: CursorKind, from: Seq, to: Seq)]] = [:]
        var hiding: [Int: Set<String>] = [:]
        for row in rows.dropFirst(moves.count) {
            let index = Int(try row.int(36)) - 1
            let found = results.indices.contains(index) ? results[index] : nil
            switch try MoveAfterword.decode(try row.text(37)) {
            case .hearing(let hidingReads):
                // Every member the batch locked has one, whether or not their move told anything.
                guard found != nil else {
                    throw StoreError.inconsistent("the hearers of move \(index + 1), of no move")
                }
                hiding[index] = hidingReads
            case .reaching(let reaching):
                guard case .success(var outcome?)? = found else {
                    throw StoreError.inconsistent("what move \(index + 1) reached, for a move that did not commit")
                }
                outcome.reachedAll += try reaching.checked(by: outcome)
                reported[index, default: []].append((reaching.kind, reaching.from, reaching.to))
                results[index] = .success(outcome)
            }
        }
        // Every move that raised its mover's counted position was asked about, and no other.
        for index in results.indices {
            guard allMembers, case .success(let outcome?) = results[index] else { continue }
            let expected = SQLStore.countedMoves(outcome).map { "\($0.kind)/\($0.from)/\($0.to)" }
            let asked = (reported[index] ?? []).map { "\($0.kind)/\($0.from)/\($0.to)" }
            guard expected.sorted() == asked.sorted() else {
                throw StoreError.inconsistent(
                    "move \(index + 1) raised \(expected) for R13 by AllMembers; the function asked for \(asked)")
            }
        }
        return try Self.withHearers(Self.toldOnceEach(results), hiding: hiding)
    }

    /// Each committed move with its hearers' privacy (R15): the function tells it for every move
    /// when the app's reciprocal read receipts are on, and for none when they are off.
    private static func withHearers(_ results: [Result<CursorOutcome?, any Error>], hiding: [Int: Set<String>])
        throws -> [Result<CursorOutcome?, any Error>]
    {
        guard !hiding.isEmpty else { return results }
        return try results.indices.map { index in
            guard case .success(var outcome?) = results[index] else { return results[index] }
            guard let hidingReads = hiding[index] else {
                throw StoreError.inconsistent("move \(index + 1) committed without its hearers' privacy")
            }
            outcome.hearers = HearersPrivacy(reciprocal: true, hidingReads: hidingReads)
                .among(outcome.recipients + outcome.reachedAll.map(\.author))
            return .success(outcome)
        }
    }

    /// Each author told once per batch, of the newest message reached (`SQLStore.toldOnceEach`).
    private static func toldOnceEach(_ results: [Result<CursorOutcome?, any Error>])
        -> [Result<CursorOutcome?, any Error>]
    {
        let committed = results.indices.compactMap { index in (try? results[index].get())?.map { (index, $0) } }
        var results = results
        for ((index, _), outcome) in zip(committed, SQLStore.toldOnceEach(committed.map(\.1))) {
            results[index] = .success(outcome)
        }
        return results
    }

    /// The outcome; nil for a delivered move the channel type ignores (R9) or one that moved nothing.
    static func outcome(_ row: any StoreRow, of move: BatchedMove) throws -> CursorOutcome? {
        let kind = move.kind
        let userID = move.userID
        guard try row.optionalInt(0) != nil else {
            throw kind == .read
                ? StoreError.channelNotFound(cid: move.channel)
                : StoreError.unknownChannel(move.channel)
        }
        // The function locked the row before the statement's snapshot: it cannot have changed between them.
        if try row.bool(35) { throw StoreError.inconsistent("a member row changed under its lock") }
        let found = try StoreRows.channel(row)
        let channel = found.channel
        let config = try StoreRules.requireConfig(found)
        // Membership first: a non-member learns nothing of the channel's messages.
        guard let readBefore = try row.optionalInt(14) else {
            throw StoreError.notMember(userID: userID, cid: channel.cid)
        }
        // Mark delivered accepts and ignores a message that is not there, as Stream does.
        if kind == .delivered, try row.optionalInt(13) == nil { return nil }
        let target = try StoreRules.requireSeq(try row.optionalInt(13), of: move.messageID ?? "", in: channel.cid)
        let before = Cursors(read: readBefore, delivered: try row.int(15))
        // Null when R9 ignored a delivered move.
        guard let readAfter = try row.optionalInt(16) else { return nil }
        let after = Cursors(read: readAfter, delivered: try row.int(17))
        let update =
            kind == .read
            ? ReceiptRules.markRead(before, upTo: target, newest: channel.lastSeq)
            : ReceiptRules.markDelivered(before, upTo: target, newest: channel.lastSeq)
        guard update.cursors == after else {
            throw StoreError.inconsistent(
                "the one-statement \(kind) moved \(before) to \(after); ReceiptRules say \(update.cursors)")
        }
        guard kind == .read || update.changed else { return nil }
        let readerRow = try ReaderRow(row, at: 18)
        guard readerRow.state.userID == userID, readerRow.state.cursors == after else {
            throw StoreError.inconsistent("the reader's row after the move is not the move's")
        }
        var recipients: [String] = []
        if let source = move.audience.source(of: update, in: channel) {
            let column = source == .members ? 33 : 34
            let ids = try row.optionalText(column).map { $0.split(separator: ",").map(String.init) } ?? []
            recipients = move.audience.recipients(ids, from: source, reader: userID)
        }
        return readerRow.outcome(of: update, in: channel, config: config, at: move.at, recipients: recipients)
    }
}

/// A row of `MovesFunction` after the moves' own: what a move reached (step 4) or its hearers' privacy (step 5).
enum MoveAfterword: Decodable {
    case reaching(Reaching)
    /// The members who may hear the move and hide their reads (R15 is on).
    case hearing(Set<String>)

    private enum CodingKeys: String, CodingKey { case hiding }

    init(from decoder: any Decoder) throws {
        let keyed = try decoder.container(keyedBy: CodingKeys.self)
        if let hiding = try keyed.decodeIfPresent(Set<String>.self, forKey: .hiding) {
            self = .hearing(hiding)
        } else {
            self = .reaching(try Reaching(from: decoder))
        }
    }

    /// One for every row: it keeps no state between calls.
    private static let decoder = JSONDecoder()

    static func decode(_ text: String) throws -> MoveAfterword {
        do {
            return try decoder.decode(MoveAfterword.self, from: Data(text.utf8))
        } catch {
            throw StoreError.inconsistent("a moves row after the moves is not readable: \(error)")
        }
    }
}

/// What one move made read by all for one kind, as `MovesFunction` found it
/// (JSON, one object per move and kind).
struct Reaching: Decodable {
    struct Lowest: Decodable {
        var userID: String
        var seq: Seq?
        enum CodingKeys: String, CodingKey {
            case userID = "user_id"
            case seq
        }
    }

    struct Message: Decodable {
        var userID: String
        var id: String
        var seq: Seq
        enum CodingKeys: String, CodingKey {
            case userID = "user_id"
            case id, seq
        }
    }

    var kind: CursorKind
    var from: Seq
    var to: Seq
    /// Whether a message of anyone but the mover lies after `from` up to `to`: where none does,
    /// the function asked no lowest positions, since the move reached nothing.
    var others: Bool
    var lowest: [Lowest]
    var reached: Bool
    var lowestOther: String?
    var upTo: Seq
    var upToForLowest: Seq
    var messages: [Message]

    enum CodingKeys: String, CodingKey {
        case kind, from, to, others, lowest, reached, messages
        case lowestOther = "lowest_other"
        case upTo = "up_to"
        case upToForLowest = "up_to_for_lowest"
    }

    /// The messages it reached, once `AllMembers.reached` of the same
    /// positions agrees with the bounds the SQL used.
    func checked(by outcome: CursorOutcome) throws -> [ReachedAll] {
        guard others else {
            // Every message it passed is the mover's, and no one's move reaches their own messages.
            guard !reached, messages.isEmpty, lowest.isEmpty, upTo == from, upToForLowest == from else {
                throw StoreError.inconsistent("R13 in SQL reached something by passing only the mover's own messages")
            }
            return []
        }
        let expected = AllMembers.reached(
            by: outcome.reader.id, from: from, to: to, lowest: lowest.map { ($0.userID, $0.seq) })
        let agrees =
            if let expected {
                reached && expected.from == from && expected.upTo == upTo && expected.lowestOther == lowestOther
                    && expected.upToForLowest == upToForLowest
            } else {
                !reached
            }
        guard agrees else {
            throw StoreError.inconsistent(
                "R13 in SQL: reached \(reached) from \(from) up to \(upTo), \(upToForLowest) for \(lowestOther ?? "none"); AllMembers says \(String(describing: expected))"
            )
        }
        guard reached || messages.isEmpty else {
            throw StoreError.inconsistent("R13 in SQL told messages of a move that reached nothing")
        }
        return messages.map { ReachedAll(kind: kind, author: $0.userID, messageID: $0.id, seq: $0.seq) }
    }
}
