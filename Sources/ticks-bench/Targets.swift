import Foundation

/// One channel (Matrix: room) of a benchmark: a sender, readers, and the
/// messages the readers will mark, oldest first.
struct BenchChannel: Sendable {
    let index: Int
    /// Ticks: the channel id (type `messaging`); Matrix: the room id.
    let id: String
    let sender: String
    let senderToken: String
    let readers: [String]
    let readerTokens: [String]
    /// Ticks: the message ids; Matrix: the event ids.
    let messageIDs: [String]
}

enum ReceiptKind: String, Sendable, Codable {
    case delivered
    case read
}

/// How a receipt seen by a sender is named: `reader|message|kind`.
func receiptKey(reader: String, message: String, kind: ReceiptKind) -> String {
    "\(reader)|\(message)|\(kind.rawValue)"
}

/// A receipts backend under test, driven over its real HTTP API.
protocol ReceiptTarget: Sendable {
    var name: String { get }
    var supportsDelivered: Bool { get }
    /// Makes the users and channels and has each sender post `messagesPerChannel` messages.
    func prepare(channels: Int, readersPerChannel: Int, messagesPerChannel: Int, prefix: String) async throws
        -> [BenchChannel]
    /// Listens as every channel's sender; `seen` gets the key of each receipt as it arrives.
    func listen(to channels: [BenchChannel], seen: @escaping @Sendable (String) -> Void) async throws -> Listening
    /// One receipt by a reader.
    func mark(_ kind: ReceiptKind, channel: BenchChannel, reader: Int, message: Int) async throws
    /// The CPU time the server (the node the requests go to) has used so far, in
    /// seconds; nil when the server does not report it.
    func serverCPUSeconds() async throws -> Double?
}

extension ReceiptTarget {
    func serverCPUSeconds() async throws -> Double? { nil }
}

/// The senders' open connections (sockets or long polls); `stop` ends them.
struct Listening: Sendable {
    let tasks: [Task<Void, Never>]
    /// A client of the listeners' own, shut down once they stopped.
    var client: HTTP? = nil

    func stop() async {
        for task in tasks { task.cancel() }
        for task in tasks { await task.value }
        await client?.shutdown()
    }
}
