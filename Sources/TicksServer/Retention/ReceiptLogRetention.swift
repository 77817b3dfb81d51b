import TicksProtocol

/// How long the receipt log keeps cursor moves, and how the pruner works
/// through it (`ticks serve --receipt-log-retention`, docs/storage.md).
///
/// The log is what gives `GET /messages/{id}/receipts` its exact times; the
/// cursors themselves (who has read what, unread counts, sync, events) never
/// need it. Past the window a receipt's time becomes an upper bound taken
/// from what is left (`ReceiptRules.reached`), flagged as such.
public struct ReceiptLogRetention: Sendable, Equatable, CustomStringConvertible {
    /// Moves older than this are deleted; nil keeps them forever.
    public var window: Duration?
    /// Time between two pruning rounds (the first comes one interval after start).
    public var interval: Duration = .seconds(60)
    /// The most moves looked at (and so deleted) in one transaction.
    public var batchSize = 1000
    /// How long a batch aims to take, from looking at its moves to its commit:
    /// the batch size halves after a batch that took longer, and doubles after
    /// one that took less than half of it (`nextBatchSize`), so how many rows
    /// a transaction deletes follows what this machine and this log allow.
    public var batchTarget: Duration = .milliseconds(2)
    /// Wait between two batches of a round, so receipts get the writer in between; never
    /// shorter than the batch before it took (unless zero).
    public var pause: Duration = .milliseconds(10)

    /// The first batch of a round; never more than `batchSize`.
    static let firstBatch = 50
    /// The smallest batch the size comes down to (or `batchSize`, if smaller).
    static let smallestBatch = 10

    /// The batch size after a batch of `size` moves that took `took`.
    func nextBatchSize(after size: Int, took: Duration) -> Int {
        let smallest = min(Self.smallestBatch, batchSize)
        if took > batchTarget { return max(size / 2, smallest) }
        if took * 2 < batchTarget { return min(size * 2, batchSize) }
        return min(max(size, smallest), batchSize)
    }

    /// 90 days: a quarter of exact receipt times, past what people look up
    /// in a message's info (docs/storage.md, "Retention of the receipt log").
    public static let defaultWindow: Duration = .seconds(90 * 86_400)
    /// The longest window taken: 100 years (a longer one is as good as `off`).
    public static let maximumWindow: Duration = .seconds(36_500 * 86_400)

    public init(window: Duration? = ReceiptLogRetention.defaultWindow) {
        self.window = window
    }

    /// Keeps every move forever.
    public static let off = ReceiptLogRetention(window: nil)

    /// Whether a pruner runs.
    public var isEnabled: Bool { window != nil }

    static let units: [(suffix: Character, seconds: Int64)] = [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)]

    /// Reads a window as the flag takes it: a whole number and a unit, `d`
    /// (days), `h`, `m` or `s` — `90d`, `12h`, `30m` — or `0` / `off` (also
    /// any zero, `0d`) to keep the log forever. Nothing else: no sign, no
    /// spaces, no fraction, at most `maximumWindow`.
    public init(parsing text: String) throws(ReceiptLogRetentionError) {
        self.init(window: try Self.window(parsing: text))
    }

    static func window(parsing text: String) throws(ReceiptLogRetentionError) -> Duration? {
        if text == "off" || text == "0" { return nil }
        guard let last = text.last, let unit = units.first(where: { $0.suffix == last }) else {
            throw .invalid(text)
        }
        let digits = text.dropLast()
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isWholeNumber }) else { throw .invalid(text) }
        // Leading zeros do not count; 18 digits always fit an Int64, and more are centuries too many.
        let significant = digits.drop { $0 == "0" }
        guard significant.count <= 18, let count = significant.isEmpty ? 0 : Int64(significant) else {
            throw .tooLong(text)
        }
        let (seconds, overflow) = count.multipliedReportingOverflow(by: unit.seconds)
        guard !overflow, seconds <= Self.maximumWindow.components.seconds else { throw .tooLong(text) }
        return seconds == 0 ? nil : .seconds(seconds)
    }

    /// The window as the flag takes it, in its largest whole unit (`90d`, `36h`), or `off`.
    public var description: String {
        guard let window else { return "off" }
        let seconds = window.components.seconds
        let unit = Self.units.first { seconds % $0.seconds == 0 } ?? Self.units[3]
        return "\(seconds / unit.seconds)\(unit.suffix)"
    }
}

/// Why a `--receipt-log-retention` value was refused.
public enum ReceiptLogRetentionError: Error, Equatable, CustomStringConvertible {
    case invalid(String)
    case tooLong(String)

    public var description: String {
        switch self {
        case .invalid(let text):
            "'\(text)' is not a retention: give a whole number and d, h, m or s (90d, 12h, 30m), or 0 or off to keep the receipt log forever"
        case .tooLong(let text):
            "'\(text)' is longer than 36500d (100 years): use off to keep the receipt log forever"
        }
    }
}
