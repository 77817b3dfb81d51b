import Foundation

/// Scenario 1: readers mark delivered and read at a total rate; latency is
/// from a reader's request start to its sender's connection seeing the receipt.
struct ReceiptsScenario {
    struct Parameters: Codable, Sendable {
        var target: String
        var channels: Int
        var members: Int
        var rate: Int
        var duration: Double
        var kinds: [ReceiptKind]
        /// How readers sent their receipts: http, or socket (frames on their own sockets).
        var via = "http"
    }

    struct Result: Codable, Sendable {
        var scenario = "receipts"
        var params: Parameters
        var achieved_rate: Double
        var latency_ms: LatencySummary
        var errors: Int
        /// Receipts whose event never reached the sender within the grace period.
        var missing: Int
        var setup_seconds: Double
        /// The server's CPU time (user and system, from its `/metrics`) over the
        /// load, divided by the receipts it answered; nil when it does not report it.
        var server_cpu_us_per_receipt: Double?
        /// This generator's own CPU over the load (its set-up left out), per receipt answered.
        var client_cpu_us_per_receipt: Double?
        /// The database's CPU (its process and children, `--database-pid`) over the same span, per receipt answered.
        var database_cpu_us_per_receipt: Double?
    }

    let target: any ReceiptTarget
    let parameters: Parameters
    /// A database's process (PostgreSQL's postmaster) whose CPU is measured beside the server's.
    var databasePid: Int32?

    func run() async throws -> Result {
        let readersPerChannel = parameters.members - 1
        let readerCount = parameters.channels * readersPerChannel
        let totalOps = Int((Double(parameters.rate) * parameters.duration).rounded())
        let opsPerReader = (totalOps + readerCount - 1) / readerCount
        let kinds = parameters.kinds
        let messagesPerChannel = opsPerReader / kinds.count + 2

        let setupStart = ContinuousClock.now
        let channels = try await target.prepare(
            channels: parameters.channels, readersPerChannel: readersPerChannel, messagesPerChannel: messagesPerChannel,
            prefix: runPrefix())
        let book = LatencyBook()
        let listening = try await target.listen(to: channels) { key in book.seen(key) }
        let setupSeconds = (ContinuousClock.now - setupStart).seconds

        let errors = Counter()
        let completed = Counter()
        // Each reader works through its own schedule, one request at a time (its
        // marks must reach the server in order), so the total is the target rate.
        let interval = Duration.seconds(Double(readerCount) / Double(parameters.rate))
        let cpuBefore = try await target.serverCPUSeconds()
        let databaseBefore = databasePid.flatMap(processTreeCPUSeconds(root:))
        let clientCPUBefore = processCPUSeconds()
        let start = ContinuousClock.now + .milliseconds(200)
        let end = start + .seconds(parameters.duration)
        let readers = channels.flatMap { channel in channel.readers.indices.map { (channel, $0) } }
        try await paced(workers: readers.count, interval: interval, from: start, until: end) { worker, op in
            let (channel, reader) = readers[worker]
            let kind = kinds[op % kinds.count]
            let message = op / kinds.count
            let key = receiptKey(reader: channel.readers[reader], message: channel.messageIDs[message], kind: kind)
            book.start(key)
            do {
                try await target.mark(kind, channel: channel, reader: reader, message: message)
                completed.increment()
            } catch {
                book.cancel(key)
                errors.increment()
            }
        }
        let elapsed = max((ContinuousClock.now - start).seconds, parameters.duration)
        let clientCPU = processCPUSeconds() - clientCPUBefore
        // Give the last events a moment to arrive.
        let grace = ContinuousClock.now + .seconds(3)
        while book.outstanding > 0, ContinuousClock.now < grace { try await Task.sleep(for: .milliseconds(20)) }
        // After the events arrived: the work of sending them is counted too.
        let cpuAfter = try await target.serverCPUSeconds()
        let databaseCPU = processTreeCPUSeconds(root: databasePid, since: databaseBefore)
        await listening.stop()
        let serverCPU = cpuBefore.flatMap { before in cpuAfter.map { $0 - before } }
        return Result(
            params: parameters, achieved_rate: (Double(completed.value) / elapsed * 10).rounded() / 10,
            latency_ms: book.summary, errors: errors.value, missing: book.outstanding,
            setup_seconds: (setupSeconds * 10).rounded() / 10, server_cpu_us_per_receipt: microsecondsEach(serverCPU, over: completed.value),
            client_cpu_us_per_receipt: microsecondsEach(clientCPU, over: completed.value),
            database_cpu_us_per_receipt: microsecondsEach(databaseCPU, over: completed.value))
    }

    static func describe(_ result: Result) -> [String] {
        let p = result.params
        return [
            "receipts on \(p.target): \(p.channels) channels of \(p.members), target \(p.rate)/s for \(p.duration)s"
                + " (\(p.kinds.map(\.rawValue).joined(separator: "+")), over \(p.via))",
            "  achieved \(result.achieved_rate)/s, errors \(result.errors), missing events \(result.missing)"
                + " (set-up \(result.setup_seconds)s)",
            "  reader → sender latency: \(result.latency_ms.text)",
            "  server CPU per receipt: \(result.server_cpu_us_per_receipt.map { "\($0) µs" } ?? "not reported")",
            "  generator CPU per receipt: \(result.client_cpu_us_per_receipt.map { "\($0) µs" } ?? "none answered")",
        ] + (result.database_cpu_us_per_receipt.map { ["  database CPU per receipt: \($0) µs"] } ?? [])
    }
}
