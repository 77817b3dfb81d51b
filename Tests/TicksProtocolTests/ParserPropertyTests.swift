import Foundation
import PropertyBased
import Testing
import TicksProtocol

/// The parsers of what clients send never trap, whatever the text: arbitrary
/// strings, and strings made of the characters each parser looks at (so the
/// generator reaches the parsers' inner paths, not just the first check).
@Suite("Parsers never trap")
struct ParserPropertyTests {
    /// Characters a timestamp is made of, and some it must refuse.
    static let timeAlphabet = Array("0123456789999999-:.TtZz+ ") + ["٣", "½", "é", "\u{301}", "😀"]
    /// Any scalar outside the surrogates (which are not scalars).
    static let anyCharacter = Gen.unicodeScalar(in: "\u{0}"..."\u{D7FF}").map(Character.init)

    static let timeLike = Gen<Character>.oneOf(Gen.element(of: timeAlphabet).compactMap { $0 }, anyCharacter)
        .string(of: 0...48)
    static let arbitrary = anyCharacter.string(of: 0...300)
    /// Valid RFC 3339 in UTC with 0–40 fractional digits, any year 0000–9999.
    static let utcTime = Gen.int64(in: -62_167_219_200_000_000...253_402_300_799_999_999)
        .map { Timestamp(microseconds: $0) }

    @Test("Timestamp(rfc3339:) on arbitrary and time-like text: nil or a time, never a trap")
    func timestampsNeverTrap() async {
        await propertyCheck(count: 2000, input: Self.timeLike) { text in
            if let time = Timestamp(rfc3339: text) {
                #expect(Timestamp(rfc3339: time.rfc3339) == time, "\(text) → \(time.rfc3339)")
            }
        }
        await propertyCheck(count: 500, input: Self.arbitrary) { text in
            _ = Timestamp(rfc3339: text)
        }
    }

    @Test("any number of fractional digits: the first six count, the rest are checked")
    func longFractions() async {
        await propertyCheck(input: Self.utcTime, Gen.number.string(of: 0...40)) { time, extra in
            let text = time.rfc3339.dropLast() + extra + "Z"
            #expect(Timestamp(rfc3339: String(text)) == time)
        }
        // The request that killed the server: 24 fractional digits.
        #expect(
            Timestamp(rfc3339: "2024-01-01T00:00:00.123456999999999999999999Z")
                == Timestamp(rfc3339: "2024-01-01T00:00:00.123456Z"))
        #expect(Timestamp(rfc3339: "2024-01-01T00:00:00.1234569999999999999999x9Z") == nil)
    }

    @Test("every time formats and parses back, to the microsecond")
    func roundTrip() async {
        await propertyCheck(count: 1000, input: Self.utcTime) { time in
            #expect(Timestamp(rfc3339: time.rfc3339) == time)
        }
        // Formatting never traps, even far outside what a client can send.
        await propertyCheck(count: 1000, input: Gen.int64()) { microseconds in
            _ = Timestamp(microseconds: microseconds).rfc3339
        }
        _ = Timestamp(microseconds: .min).rfc3339
        _ = Timestamp(microseconds: .max).rfc3339
        _ = Timestamp(Date.distantFuture.addingTimeInterval(1e300))
    }

    static let idAlphabet = Array("abzAZ09@_-") + [" ", ":", "/", "é", "\u{0}", "😀"]
    static let idLike = Gen.element(of: idAlphabet).compactMap { $0 }.string(of: 0...300)

    @Test("Identifier.isValid is exactly 1–255 bytes of [a-zA-Z0-9@_-]")
    func identifiers() async {
        await propertyCheck(count: 2000, input: Self.idLike) { text in
            let expected =
                (1...255).contains(text.utf8.count)
                && text.unicodeScalars.allSatisfy {
                    ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0)
                        || "@_-".unicodeScalars.contains($0)
                }
            #expect(Identifier.isValid(text) == expected, "\(text.debugDescription)")
        }
    }

    @Test("ChannelID(cid:) accepts exactly type:id with a valid type name and id, and prints it back")
    func channelIDs() async {
        let cidLike = Gen<Character>.oneOf(
            Gen.element(of: Self.idAlphabet + [":", ":"]).compactMap { $0 }, Self.anyCharacter
        ).string(of: 0...80)
        await propertyCheck(count: 2000, input: cidLike) { text in
            guard let cid = ChannelID(cid: text) else { return }
            #expect(cid.rawValue == text)
            #expect(Identifier.isValidTypeName(cid.type))
            #expect(Identifier.isValid(cid.id))
        }
        #expect(ChannelID(cid: "messaging:trip") == ChannelID(type: "messaging", id: "trip"))
        #expect(ChannelID(cid: "messaging:a:b") == nil)
        #expect(ChannelID(cid: ":trip") == nil)
        #expect(ChannelID(cid: "messaging:") == nil)
    }

    @Test("JSONValue decodes any JSON a client may send, deeply nested or not, and encodes it back")
    func jsonValues() async throws {
        let depth = 400
        let nested = String(repeating: "[", count: depth) + "1" + String(repeating: "]", count: depth)
        let value = try JSONDecoder().decode(JSONValue.self, from: Data(nested.utf8))
        #expect(try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(value)) == value)
        let jsonish = Gen.element(of: Array("{}[]\":,0123456789.eE+-truefalsnl \\u")).compactMap { $0 }
            .string(of: 0...80)
        await propertyCheck(count: 2000, input: jsonish) { text in
            _ = try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        }
    }
}
