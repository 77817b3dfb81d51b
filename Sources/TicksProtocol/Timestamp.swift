import Foundation

/// A point in time with microsecond precision, written as RFC 3339 in UTC with
/// six fractional digits (`2026-11-22T10:00:00.123456Z`), as Stream does.
public struct Timestamp: Codable, Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Microseconds since 1970-01-01T00:00:00Z.
    public var microseconds: Int64

    public init(microseconds: Int64) { self.microseconds = microseconds }

    public init(_ date: Date) {
        self.microseconds = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
    }

    public static func now() -> Timestamp { Timestamp(Date()) }

    public var date: Date { Date(timeIntervalSince1970: Double(microseconds) / 1_000_000) }

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool { lhs.microseconds < rhs.microseconds }

    public var description: String { rfc3339 }

    public var rfc3339: String {
        let seconds = microseconds.floorDivided(by: 1_000_000)
        let fraction = microseconds - seconds * 1_000_000
        let whole = Date(timeIntervalSince1970: Double(seconds))
            .formatted(Date.ISO8601FormatStyle(timeZone: .gmt))
        // `whole` ends in "Z"; put the fraction before it.
        let digits = String(fraction)
        let padded = String(repeating: "0", count: 6 - digits.count) + digits
        return String(whole.dropLast()) + "." + padded + "Z"
    }

    /// Parses RFC 3339 with or without fractional seconds and with any offset.
    public init?(rfc3339 text: String) {
        var base = text
        var fractionMicros: Int64 = 0
        if let dot = text.firstIndex(of: ".") {
            let afterDot = text[text.index(after: dot)...]
            let digits = afterDot.prefix(while: \.isNumber)
            guard !digits.isEmpty else { return nil }
            let micros = String(digits.prefix(6)).padding(toLength: 6, withPad: "0", startingAt: 0)
            fractionMicros = Int64(micros) ?? 0
            base = String(text[..<dot]) + String(afterDot.dropFirst(digits.count))
        }
        guard let date = try? Date.ISO8601FormatStyle().parse(base) else { return nil }
        self.microseconds = Int64(date.timeIntervalSince1970) * 1_000_000 + fractionMicros
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let value = Timestamp(rfc3339: text) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "'\(text)' is not an RFC 3339 time")
        }
        self = value
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rfc3339)
    }
}

extension Int64 {
    fileprivate func floorDivided(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor < 0) ? quotient - 1 : quotient
    }
}
