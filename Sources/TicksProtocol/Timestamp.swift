import Foundation

/// A point in time with microsecond precision, written as RFC 3339 in UTC with
/// six fractional digits (`2026-11-22T10:00:00.123456Z`), as Stream does.
public struct Timestamp: Codable, Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Microseconds since 1970-01-01T00:00:00Z.
    public var microseconds: Int64

    public init(microseconds: Int64) { self.microseconds = microseconds }

    /// The date to the microsecond, clamped to what 64 bits of microseconds
    /// hold (±285,000 years), so any `Date` converts.
    public init(_ date: Date) {
        let seconds = min(max(date.timeIntervalSince1970, -9e12), 9e12)
        self.microseconds = seconds.isNaN ? 0 : Int64((seconds * 1_000_000).rounded())
    }

    public static func now() -> Timestamp { Timestamp(Date()) }

    public var date: Date { Date(timeIntervalSince1970: Double(microseconds) / 1_000_000) }

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool { lhs.microseconds < rhs.microseconds }

    public var description: String { rfc3339 }

    /// `YYYY-MM-DDTHH:MM:SS.ffffffZ`, computed directly: every event and
    /// answer carries several times, and a date formatter costs more than the
    /// arithmetic.
    public var rfc3339: String {
        let (seconds, fraction) = microseconds.floorDivided(by: 1_000_000)
        let (days, secondOfDay) = seconds.floorDivided(by: 86_400)
        let (year, month, day) = Self.civil(fromDays: days)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(27)
        func put(_ value: Int, digits: Int) {
            var divisor = 1
            for _ in 1..<digits { divisor *= 10 }
            var rest = value
            while divisor > 0 {
                bytes.append(UInt8(ascii: "0") + UInt8(rest / divisor))
                rest %= divisor
                divisor /= 10
            }
        }
        guard (0...9999).contains(year) else { return Self.formatted(seconds: seconds, fraction: fraction) }
        put(year, digits: 4)
        bytes.append(UInt8(ascii: "-"))
        put(month, digits: 2)
        bytes.append(UInt8(ascii: "-"))
        put(day, digits: 2)
        bytes.append(UInt8(ascii: "T"))
        put(secondOfDay / 3600, digits: 2)
        bytes.append(UInt8(ascii: ":"))
        put(secondOfDay / 60 % 60, digits: 2)
        bytes.append(UInt8(ascii: ":"))
        put(secondOfDay % 60, digits: 2)
        bytes.append(UInt8(ascii: "."))
        put(fraction, digits: 6)
        bytes.append(UInt8(ascii: "Z"))
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Years outside 0…9999, through Foundation.
    private static func formatted(seconds: Int64, fraction: Int) -> String {
        let whole = Date(timeIntervalSince1970: Double(seconds)).formatted(Date.ISO8601FormatStyle(timeZone: .gmt))
        let digits = String(fraction)
        return String(whole.dropLast()) + "." + String(repeating: "0", count: 6 - digits.count) + digits + "Z"
    }

    /// The proleptic Gregorian date of a day number (days since 1970-01-01),
    /// after Howard Hinnant's `civil_from_days`.
    static func civil(fromDays days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (Int(yearOfEra + era * 400 + (month <= 2 ? 1 : 0)), Int(month), Int(day))
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// The day number of a proleptic Gregorian date, after Hinnant's `days_from_civil`.
    static func days(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let m = Int64(month)
        let dayOfYear = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// A bound on the seconds of a parsed time, past year 9999 either way.
    static let maxSeconds: Double = 400_000_000_000

    /// Parses RFC 3339 with or without fractional seconds and with any offset;
    /// nil for anything else, whatever the text (never traps).
    public init?(rfc3339 text: String) {
        if text.hasSuffix("Z") || text.hasSuffix("z") {
            // UTC: the direct parser is the whole answer (Foundation's would
            // accept 24:00 or February 30).
            guard let utc = Self.parseUTC(text) else { return nil }
            self = utc
            return
        }
        var base = text
        var fractionMicros: Int64 = 0
        if let dot = text.firstIndex(of: ".") {
            let afterDot = text[text.index(after: dot)...]
            let digits = afterDot.prefix(while: { $0.isASCII && $0.isNumber })
            guard !digits.isEmpty else { return nil }
            let micros = String(digits.prefix(6)).padding(toLength: 6, withPad: "0", startingAt: 0)
            fractionMicros = Int64(micros) ?? 0
            base = String(text[..<dot]) + String(afterDot.dropFirst(digits.count))
        }
        guard let date = try? Date.ISO8601FormatStyle().parse(base) else { return nil }
        // Whole seconds only within years 0…9999: never a trap converting or multiplying.
        let seconds = date.timeIntervalSince1970
        guard seconds.isFinite, abs(seconds) < Self.maxSeconds else { return nil }
        self.microseconds = Int64(seconds) * 1_000_000 + fractionMicros
    }

    /// The form Ticks writes, `YYYY-MM-DDTHH:MM:SS[.f…]Z`, without a date
    /// parser (proleptic Gregorian, as RFC 3339 says); nil for anything else.
    private static func parseUTC(_ text: String) -> Timestamp? {
        var utf8 = Array(text.utf8)
        guard utf8.count >= 20, utf8.last == UInt8(ascii: "Z") || utf8.last == UInt8(ascii: "z") else { return nil }
        utf8.removeLast()
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for index in range {
                let byte = utf8[index]
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        func byte(_ index: Int, is character: Unicode.Scalar) -> Bool { utf8[index] == UInt8(ascii: character) }
        guard byte(4, is: "-"), byte(7, is: "-"), byte(10, is: "T") || byte(10, is: "t"), byte(13, is: ":"),
            byte(16, is: ":"), let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
            (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day), hour < 24, minute < 60,
            second < 60
        else { return nil }
        var micros = 0
        if utf8.count > 19 {
            // Any number of fractional digits; only the first six count (the
            // rest are checked, never accumulated: they could overflow).
            guard byte(19, is: "."), utf8.count > 20,
                utf8[20...].allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
                let fraction = number(20..<min(utf8.count, 26))
            else { return nil }
            micros = fraction
            for _ in 0..<(6 - min(utf8.count - 20, 6)) { micros *= 10 }
        }
        let seconds = days(year: year, month: month, day: day) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
        return Timestamp(microseconds: seconds * 1_000_000 + Int64(micros))
    }

    /// An RFC 3339 string; in v2 also integer Unix nanoseconds, as v2 writes
    /// times (in v1 a number is refused: it could be seconds or milliseconds).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if decoder.apiVersion == .v2, let nanoseconds = try? container.decode(Int64.self) {
            self.init(microseconds: nanoseconds.floorDivided(by: 1000).quotient)
            return
        }
        let text = try container.decode(String.self)
        guard let value = Timestamp(rfc3339: text) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "'\(text)' is not an RFC 3339 time")
        }
        self = value
    }

    /// v1: RFC 3339 with microseconds. v2: integer Unix nanoseconds, exact
    /// past Int64's reach too (after 2262, as a decimal number).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch encoder.apiVersion {
        case .v1:
            try container.encode(rfc3339)
        case .v2:
            let (nanoseconds, overflow) = microseconds.multipliedReportingOverflow(by: 1000)
            if overflow {
                try container.encode(Decimal(microseconds) * 1000)
            } else {
                try container.encode(nanoseconds)
            }
        }
    }
}

extension Int64 {
    /// Floor division and its non-negative remainder; cannot overflow for a positive divisor.
    fileprivate func floorDivided(by divisor: Int64) -> (quotient: Int64, remainder: Int) {
        let (quotient, remainder) = quotientAndRemainder(dividingBy: divisor)
        return remainder < 0 ? (quotient - 1, Int(remainder + divisor)) : (quotient, Int(remainder))
    }
}
