import Foundation
import TicksProtocol

/// Sending through the outbox: a message is durable before any network
/// call, and each channel's pending messages go one at a time, oldest first.
extension ChatClient {
    /// Writes the message to the outbox, then sends it. Returns it as pending.
    func send(_ text: String, id: String?, extraData: [String: JSONValue], to cid: ChannelID) async throws
        -> ChatMessage
    {
        guard let session else { throw TicksClientError.notConnected }
        guard !text.isEmpty else {
            throw TicksClientError.api(statusCode: 400, code: 4, message: "a message needs text")
        }
        let id = id ?? UUID().uuidString.lowercased()
        guard Identifier.isValid(id) else {
            throw TicksClientError.api(statusCode: 400, code: 4, message: "'\(id)' is not a valid message id")
        }
        if let existing = try state(of: cid).message(withID: id) { return existing }
        let custom = try JSONEncoder().encode(extraData)
        let entry = OutboxEntry(
            id: id, userID: session.userID, cid: cid.rawValue, text: text,
            custom: String(decoding: custom, as: UTF8.self), createdAt: Timestamp.now().microseconds,
            state: .pending, attempts: 0, lastError: nil)
        // Durable before any network call.
        try await outbox.add(entry)
        local[id] = entry
        publish(cid)
        startSending(cid)
        guard let message = try state(of: cid).message(withID: id) else { throw TicksClientError.unknownMessage(id) }
        return message
    }

    /// Moves a failed message back to pending and sends it again.
    public func resend(messageId id: String) async throws {
        guard var entry = local[id] else { throw TicksClientError.unknownMessage(id) }
        guard entry.state == .failed else { return }
        entry.state = .pending
        entry.attempts = 0
        entry.lastError = nil
        try await outbox.update(entry)
        local[id] = entry
        guard let cid = ChannelID(cid: entry.cid) else { return }
        publish(cid)
        startSending(cid)
    }

    /// Sends the channel's pending messages one at a time, oldest first, so
    /// they reach the server in the order they were written.
    func startSending(_ cid: ChannelID) {
        guard senders[cid] == nil, let session, nextPending(in: cid) != nil else { return }
        let attempts = max(configuration.sendAttempts, 1)
        let backoff = configuration.sendBackoff
        senders[cid] = Task {
            while !Task.isCancelled, let entry = self.nextPending(in: cid) {
                var attempt = 0
                while !Task.isCancelled {
                    attempt += 1
                    do {
                        let message = try await session.api.sendMessage(
                            id: entry.id, text: entry.text, custom: entry.extraData, to: cid)
                        await self.sent(message, cid: cid)
                        break
                    } catch let error as TicksClientError where error.isTransient && attempt < attempts {
                        await self.recordAttempt(entry.id, attempt: attempt, error: error)
                        try? await self.time.sleep(for: backoff.delay(after: attempt))
                    } catch is CancellationError {
                        break
                    } catch {
                        await self.failed(entry.id, attempt: attempt, error: error)
                        break
                    }
                }
            }
            self.senders[cid] = nil
        }
    }

    func outboxEntries(in cid: ChannelID) -> [OutboxEntry] {
        local.values.filter { $0.cid == cid.rawValue }.sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }
    }

    /// The oldest message of the channel still waiting to be sent.
    private func nextPending(in cid: ChannelID) -> OutboxEntry? {
        outboxEntries(in: cid).first { $0.state == .pending }
    }

    private func recordAttempt(_ id: String, attempt: Int, error: any Error) async {
        guard var entry = local[id] else { return }
        entry.attempts = attempt
        entry.lastError = String(describing: error)
        local[id] = entry
        try? await outbox.update(entry)
    }

    private func failed(_ id: String, attempt: Int, error: any Error) async {
        guard var entry = local[id] else { return }
        logger.info("a message could not be sent", metadata: ["id": "\(id)", "error": "\(error)"])
        entry.state = .failed
        entry.attempts = attempt
        entry.lastError = String(describing: error)
        local[id] = entry
        do {
            try await outbox.update(entry)
        } catch {
            logger.error("the outbox could not be updated", metadata: ["id": "\(id)", "error": "\(error)"])
        }
        if let cid = ChannelID(cid: entry.cid) { publish(cid) }
    }

    private func sent(_ message: Message, cid: ChannelID) async {
        var model = models[cid] ?? ChannelModel(cid: cid)
        model.stored(message, currentUserID: currentUserID ?? message.user.id)
        models[cid] = model
        await acknowledge(message.id)
        publish(cid)
    }

    /// The server has the message: it leaves the outbox.
    func acknowledge(_ id: String) async {
        guard let entry = local.removeValue(forKey: id) else { return }
        do {
            try await outbox.remove(id)
        } catch {
            logger.error("the outbox could not be updated", metadata: ["id": "\(id)", "error": "\(error)"])
        }
        if let cid = ChannelID(cid: entry.cid) { publish(cid) }
    }
}
