import Foundation
import TicksProtocol

/// Receipts: marking a channel read or unread, a message's receipts, and
/// marking messages from others delivered (batched and throttled).
extension ChatClient {
    /// Receipts from other members as they arrive, live or caught up after a
    /// reconnect (CometChat's `onMessagesDelivered` / `onMessagesRead`).
    public nonisolated func receiptEvents() -> AsyncStream<MessageReceipt> {
        receiptBroadcast.subscribe()
    }

    // MARK: Read and unread

    func markRead(_ cid: ChannelID, upTo messageID: String?) async throws {
        guard let session else { throw TicksClientError.notConnected }
        let event: Event
        if configuration.receiptsOnSocket,
            let ack = try await onSocket({ .markRead(cid.rawValue, upTo: messageID, requestID: $0) }),
            let answered = ack.event
        {
            event = answered
        } else {
            event = try await session.api.markRead(cid, upTo: messageID)
        }
        await handle(event)
    }

    /// Sends a receipt as a frame on the open socket and returns the server's
    /// ack; nil when no socket could carry it (HTTP must). A refusal throws,
    /// as HTTP's would.
    private func onSocket(_ request: @Sendable (String) -> SocketReceipt.Request) async throws -> SocketReceipt.Ack? {
        let ack: SocketReceipt.Ack
        do {
            ack = try await socketRequests.send(request)
        } catch let error as TicksClientError where error.isTransient {
            return nil
        }
        if let error = ack.error {
            throw TicksClientError.api(statusCode: error.statusCode, code: error.code, message: error.message)
        }
        return ack
    }

    func markUnread(_ cid: ChannelID, from messageID: String) async throws {
        guard let session else { throw TicksClientError.notConnected }
        try await session.api.markUnread(cid, from: messageID)
        // The server's notification.mark_unread brings the new cursor and counts.
    }

    /// Every member's receipt for the message (Ticks' receipts endpoint): exact
    /// times, or upper bounds flagged by `MessageReceipt.readAtIsExact` and
    /// `deliveredAtIsExact` once the server pruned the moves from its receipt log.
    public func receipts(for messageId: String) async throws -> MessageReceipts {
        guard let session else { throw TicksClientError.notConnected }
        let response = try await session.api.receipts(for: messageId)
        guard let cid = response.cid ?? models.values.first(where: { $0.hasMessage(messageId) })?.cid
        else { throw TicksClientError.invalidResponse("the receipts of '\(messageId)' name no channel") }
        return MessageReceipts(
            receipts: response.receipts.map { receipt in
                MessageReceipt(
                    messageId: messageId, cid: cid, user: ChatUser(receipt.user),
                    receiptType: receipt.readAt != nil ? .read : .delivered,
                    deliveredAt: receipt.deliveredAt?.date, readAt: receipt.readAt?.date,
                    deliveredAtIsExact: receipt.deliveredAtExact ?? true, readAtIsExact: receipt.readAtExact ?? true)
            }, readCount: response.readCount, deliveredCount: response.deliveredCount,
            readByAll: response.readByAll ?? false, deliveredToAll: response.deliveredToAll ?? false,
            playedCount: response.playedCount ?? 0)
    }

    /// Tells the author (and the members who may see this user's reads, R14) that this user
    /// played a voice note or video: the server keeps the first play, so calling again is
    /// harmless. When it was first played; throws the server's 400 for a message with no audio
    /// or video, the user's own message, or a channel type with played events off.
    @discardableResult
    public func markPlayed(messageId: String) async throws -> Date? {
        guard let session else { throw TicksClientError.notConnected }
        return try await session.api.markPlayed(messageId).playedAt?.date
    }

    // MARK: Delivered

    /// Whether this device should tell senders their messages arrived.
    var marksDelivered: Bool {
        configuration.marksDelivered && (me?.sharesDeliveryReceipts ?? true)
    }

    /// A message from someone else reached this device: mark it delivered soon,
    /// unless the channel type has no delivery events (R9) or it is already.
    func noteArrived(_ message: Message, in cid: ChannelID) {
        guard marksDelivered, let session else { return }
        guard let config = models[cid]?.config ?? typeConfigs[cid.type] else {
            // A channel not opened here: learn its type's config first.
            awaitingType[cid.type, default: []].append((message, cid))
            if awaitingType[cid.type]?.count == 1 {
                Task { await self.fetchTypeConfig(cid.type, session) }
            }
            return
        }
        guard config.deliveryEvents else { return }
        if models[cid]?.isDelivered(message.id, currentUserID: session.userID) == true { return }
        delivery.add(.init(cid: cid, messageID: message.id, createdAt: message.createdAt.microseconds))
        scheduleDeliveryFlush()
    }

    private func fetchTypeConfig(_ name: String, _ session: Session) async {
        do {
            typeConfigs[name] = try await session.api.channelType(named: name)
        } catch {
            logger.debug("could not read a channel type", metadata: ["type": "\(name)", "error": "\(error)"])
        }
        let waiting = awaitingType.removeValue(forKey: name) ?? []
        guard typeConfigs[name] != nil else { return }
        for (message, cid) in waiting { noteArrived(message, in: cid) }
    }

    /// At most one call per `deliveryThrottle`, each with at most `deliveryBatchSize` channels.
    private func scheduleDeliveryFlush() {
        guard deliveryTask == nil, !delivery.isEmpty else { return }
        let due = lastDeliveryCall.map { $0 + configuration.deliveryThrottle } ?? .zero
        deliveryTask = Task {
            try? await self.time.sleep(until: due)
            guard !Task.isCancelled else { return }
            await self.flushDelivered()
        }
    }

    private func flushDelivered() async {
        guard let session else {
            deliveryTask = nil
            return
        }
        let batch = delivery.takeBatch().filter { mark in
            !(models[mark.cid]?.isDelivered(mark.messageID, currentUserID: session.userID) ?? false)
        }
        if !batch.isEmpty {
            do {
                let entries = batch.map { SocketReceipt.DeliveredEntry(cid: $0.cid.rawValue, id: $0.messageID) }
                var sent = false
                if configuration.receiptsOnSocket {
                    sent = try await onSocket({ .markDelivered(entries, requestID: $0) }) != nil
                }
                if !sent { try await session.api.markDelivered(batch.map { ($0.cid, $0.messageID) }) }
            } catch let error as TicksClientError where error.isTransient {
                logger.debug("mark delivered failed; will retry", metadata: ["error": "\(error)"])
                delivery.restore(batch)
            } catch is CancellationError {
                delivery.restore(batch)
            } catch {
                logger.warning("mark delivered refused", metadata: ["error": "\(error)"])
            }
            // The next call waits a full period after this one ended.
            lastDeliveryCall = time.now
        }
        deliveryTask = nil
        if status.isConnected { scheduleDeliveryFlush() }
    }

    /// After a connect: the newest message of each recent channel, if it came
    /// from someone else and this user's devices have not marked it delivered.
    func catchUpDelivered(_ session: Session) async {
        do {
            let states = try await session.api.queryChannels(
                of: session.userID, limit: min(max(configuration.deliveryCatchUpChannels, 1), 30), messageLimit: 1)
            for state in states {
                typeConfigs[state.channel.type] = state.channel.config
                guard state.channel.config.deliveryEvents, let newest = state.messages.last,
                    newest.user.id != session.userID
                else { continue }
                let cid = state.channel.cid
                let own = state.read.first { $0.user.id == session.userID }
                if own?.lastDeliveredMessageID == newest.id || own?.lastReadMessageID == newest.id { continue }
                noteArrived(newest, in: cid)
            }
        } catch {
            logger.debug("delivered catch-up failed", metadata: ["error": "\(error)"])
        }
    }
}
