import ArgumentParser
import Foundation
import TicksServer

/// `ticks serve --receipt-log-retention` (docs/storage.md, "Retention of the receipt log").
struct RetentionOptions: ParsableArguments {
    @Option(
        name: .customLong("receipt-log-retention"),
        help: ArgumentHelp(
            """
            How long the receipt log keeps each cursor move: 90d, 12h, 30m, or 0/off to keep it forever \
            (or TICKS_RECEIPT_LOG_RETENTION). Older receipt times become upper bounds ("read by").
            """,
            valueName: "DURATION"))
    var receiptLogRetention: String?

    func validate() throws {
        _ = try retention()
    }

    /// The flag, else the environment, else 90 days.
    func retention() throws -> ReceiptLogRetention {
        guard let text = receiptLogRetention ?? ProcessInfo.processInfo.environment["TICKS_RECEIPT_LOG_RETENTION"]
        else { return ReceiptLogRetention() }
        do {
            return try ReceiptLogRetention(parsing: text)
        } catch {
            throw ValidationError("--receipt-log-retention \(error)")
        }
    }
}
