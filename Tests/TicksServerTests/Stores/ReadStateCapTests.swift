import Testing
import TicksProtocol

@testable import TicksServer

/// docs/compatibility.md, "Read state as a time": the read time is capped to
/// the microsecond before the millisecond of the first message past the
/// cursor, so JavaScript's millisecond dates compare it as before that message.
@Suite("The read state's time cap")
struct ReadStateCapTests {
    /// (next message, time of the move) → the time shown, in microseconds.
    static let cases: [(next: Int64?, time: Int64, shown: Int64)] = [
        (nil, 5_000_123, 5_000_123),  // no message past the cursor: the move's time
        (5_000_123, 4_999_999, 4_999_999),  // an earlier millisecond already
        (5_000_123, 5_000_000, 4_999_999),  // the same millisecond: before it
        (5_000_123, 5_000_122, 4_999_999),
        (5_000_123, 5_000_123, 4_999_999),
        (5_000_123, 9_000_000, 4_999_999),  // after the message (mark unread): before its millisecond
        (5_000_000, 5_000_000, 4_999_999),  // a message on a millisecond boundary
        (5_000_999, 5_000_998, 4_999_999),
        (-1_500, 0, -2_001),  // before 1970 the millisecond floors too
        (0, 0, -1),
    ]

    @Test("each case shows the time it should", arguments: 0..<cases.count)
    func cap(row: Int) {
        let (next, time, shown) = Self.cases[row]
        let capped = MemberState.before(next.map { Timestamp(microseconds: $0) }, Timestamp(microseconds: time))
        #expect(capped.microseconds == shown)
        if let next {
            // As a JavaScript client compares: the shown time's millisecond is before the message's.
            #expect(Self.floorMillisecond(capped.microseconds) < Self.floorMillisecond(next))
        }
    }

    static func floorMillisecond(_ micros: Int64) -> Int64 { (micros - ((micros % 1000) + 1000) % 1000) / 1000 }
}
