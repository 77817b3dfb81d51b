import PropertyBased
import Testing

@testable import TicksServer

/// `--receipt-log-retention DURATION`: what it takes, what it refuses, and
/// that it prints back what it read.
@Suite("Receipt log retention flag")
struct ReceiptLogRetentionTests {
    static let units: [Character: Int64] = ["d": 86_400, "h": 3_600, "m": 60, "s": 1]
    static let maximum = ReceiptLogRetention.maximumWindow.components.seconds

    @Test("examples: 90d, 12h, 30m, 45s; 0, 0d and off keep the log; the default is 90 days")
    func examples() throws {
        #expect(try ReceiptLogRetention(parsing: "90d").window == .seconds(90 * 86_400))
        #expect(try ReceiptLogRetention(parsing: "12h").window == .seconds(12 * 3_600))
        #expect(try ReceiptLogRetention(parsing: "30m").window == .seconds(30 * 60))
        #expect(try ReceiptLogRetention(parsing: "45s").window == .seconds(45))
        for off in ["0", "0d", "000h", "off"] {
            let retention = try ReceiptLogRetention(parsing: off)
            #expect(retention.window == nil && !retention.isEnabled, "\(off)")
        }
        #expect(ReceiptLogRetention().window == .seconds(90 * 86_400))
        #expect(ReceiptLogRetention().description == "90d")
        #expect(try ReceiptLogRetention(parsing: "36500d").window == ReceiptLogRetention.maximumWindow)
        for refused in [
            "", "d", "90", "-1d", "+1d", "1.5d", "90 d", " 90d", "90D", "1w", "OFF", "1d2h", "36501d",
            "99999999999999999999d",
        ] {
            #expect(throws: ReceiptLogRetentionError.self, "\(refused.debugDescription)") {
                try ReceiptLogRetention(parsing: refused)
            }
        }
    }

    @Test("a whole number and a unit is that many seconds, and prints back to the same window")
    func numbersAndUnits() async {
        await propertyCheck(
            count: 2000, input: Gen.int64(in: 1...(36_500 * 86_400)), Gen.element(of: Array("dhms")).compactMap { $0 }
        ) { count, unit in
            let text = "\(count)\(unit)"
            let (seconds, overflow) = count.multipliedReportingOverflow(by: Self.units[unit]!)
            if !overflow, seconds <= Self.maximum {
                let retention = try? ReceiptLogRetention(parsing: text)
                #expect(retention?.window == .seconds(seconds), "\(text)")
                // Printed in its largest whole unit, it reads back as the same window.
                #expect(retention.flatMap { try? ReceiptLogRetention(parsing: $0.description) } == retention, "\(text)")
            } else {
                #expect(throws: ReceiptLogRetentionError.tooLong(text)) { try ReceiptLogRetention(parsing: text) }
            }
        }
    }

    static let alphabet = Array("0123456789dhmsoffw+-. DH") + ["٣", "½", "\u{0}"]
    static let flagLike = Gen.element(of: alphabet).compactMap { $0 }.string(of: 0...24)

    @Test("any text: taken only when it is digits and one of d, h, m, s (or off), never a trap")
    func anyText() async {
        await propertyCheck(count: 4000, input: Self.flagLike) { text in
            let digits = text.dropLast()
            let grammar =
                text == "off"
                || text == "0"
                || (!digits.isEmpty && digits.allSatisfy { $0.isASCII && $0.isWholeNumber }
                    && text.last.map { Self.units[$0] != nil } == true)
            let retention = try? ReceiptLogRetention(parsing: text)
            if retention != nil { #expect(grammar, "\(text.debugDescription) was taken") }
            if grammar, retention == nil {
                // Refused only for being longer than 100 years.
                #expect(throws: ReceiptLogRetentionError.tooLong(text)) { try ReceiptLogRetention(parsing: text) }
            }
        }
    }

    @Test("a batch's size halves after a batch slower than the target, doubles after one under half of it")
    func batchSizeFollowsTheTarget() {
        var retention = ReceiptLogRetention()
        retention.batchSize = 1000
        retention.batchTarget = .milliseconds(2)
        let cases: [(size: Int, took: Duration, next: Int)] = [
            (50, .microseconds(500), 100),  // fast: doubles
            (800, .microseconds(999), 1000),  // …up to batchSize
            (1000, .zero, 1000),
            (50, .microseconds(1500), 50),  // within the target: stays
            (50, .milliseconds(2), 50),
            (50, .microseconds(2001), 25),  // slow: halves
            (15, .milliseconds(80), 10),  // …down to the smallest batch
            (10, .seconds(1), 10),
        ]
        for (size, took, next) in cases {
            #expect(retention.nextBatchSize(after: size, took: took) == next, "\(size) taking \(took)")
        }
        // A batchSize under the smallest batch is kept to.
        retention.batchSize = 4
        #expect(retention.nextBatchSize(after: 4, took: .seconds(1)) == 4)
        #expect(retention.nextBatchSize(after: 4, took: .zero) == 4)
    }
}
