import Foundation
import Testing

@testable import TicksProtocol

@Suite struct TimestampTests {
    /// The hand-written formatter and parser agree with Foundation's ISO 8601
    /// style from 1900 to 2200, leap days and times before 1970 included.
    @Test func formatsAndParsesLikeFoundation() throws {
        var generator = SystemRandomNumberGenerator()
        let foundation = Date.ISO8601FormatStyle(timeZone: .gmt)
        let samples: [Int64] =
            [0, -1, 951_782_400_000_000, 951_868_799_999_999, 4_107_542_399_999_999]
            + (0..<2000).map { _ in Int64.random(in: -2_208_988_800_000_000...7_258_118_400_000_000, using: &generator) }
        for micros in samples {
            let timestamp = Timestamp(microseconds: micros)
            let seconds = Int64((Double(micros) / 1_000_000).rounded(.down))
            let whole = Date(timeIntervalSince1970: Double(seconds)).formatted(foundation)
            let fraction = String(format: "%06lld", micros - seconds * 1_000_000)
            #expect(timestamp.rfc3339 == String(whole.dropLast()) + "." + fraction + "Z", "\(micros)")
            #expect(Timestamp(rfc3339: timestamp.rfc3339) == timestamp, "\(micros)")
        }
    }

    /// RFC 3339 is proleptic Gregorian; Foundation switches to the Julian calendar before 1582.
    @Test func farDatesAreProlepticGregorian() {
        let yearOne = Timestamp(microseconds: -62_135_596_800_000_000)
        #expect(yearOne.rfc3339 == "0001-01-01T00:00:00.000000Z")
        #expect(Timestamp(rfc3339: "0001-01-01T00:00:00Z") == yearOne)
    }

    @Test func parsesOtherFormsOfRFC3339() {
        #expect(Timestamp(rfc3339: "2026-11-22T10:00:00Z")?.microseconds == 1_795_341_600_000_000)
        #expect(Timestamp(rfc3339: "2026-11-22T10:00:00.5Z")?.microseconds == 1_795_341_600_500_000)
        #expect(Timestamp(rfc3339: "2026-11-22T10:00:00.123456789Z")?.microseconds == 1_795_341_600_123_456)
        #expect(Timestamp(rfc3339: "2026-11-22T11:00:00.25+01:00")?.microseconds == 1_795_341_600_250_000)
    }

    @Test func refusesWhatIsNotATime() {
        for text in ["", "yesterday", "2026-02-30T10:00:00Z", "2026-13-01T10:00:00Z", "2026-11-22T24:00:00Z",
            "2026-11-22T10:00:00.Z", "2026-11-22 10:00:00Z", "2026-11-22T10:00:00.12a4Z"]
        {
            #expect(Timestamp(rfc3339: text) == nil, "\(text)")
        }
    }

    /// v1 writes RFC 3339; v2 integer Unix nanoseconds, exact past Int64's
    /// reach too, and reads them back; v1 refuses a number (seconds or milliseconds?).
    @Test(arguments: [Int64(0), 1_795_913_160_123_456, -1, 9_300_000_000_000_000, -9_300_000_000_000_000])
    func versions(microseconds: Int64) throws {
        struct Box: Codable { var at: Timestamp }
        let box = Box(at: Timestamp(microseconds: microseconds))
        func json(_ version: APIVersion) throws -> String {
            let encoder = JSONEncoder()
            encoder.userInfo[.apiVersion] = version
            return String(decoding: try encoder.encode(box), as: UTF8.self)
        }
        #expect(try json(.v1) == #"{"at":"\#(box.at.rfc3339)"}"#)
        #expect(try json(.v2) == #"{"at":\#(microseconds)000}"# || microseconds == 0 && json(.v2) == #"{"at":0}"#)
        let decoder = JSONDecoder()
        decoder.userInfo[.apiVersion] = APIVersion.v2
        if microseconds.magnitude < Int64.max.magnitude / 1000 {
            #expect(try decoder.decode(Box.self, from: Data(try json(.v2).utf8)).at == box.at)
            #expect(throws: DecodingError.self) { try JSONDecoder().decode(Box.self, from: Data(try json(.v2).utf8)) }
        }
        #expect(try decoder.decode(Box.self, from: Data(try json(.v1).utf8)).at == box.at)
    }
}
