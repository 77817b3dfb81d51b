import Foundation
import TicksProtocol

/// Opening and loading channels, and publishing their state to the app.
extension ChatClient {
    /// A handle on a channel. Nothing is fetched yet: call `load()`, or wait
    /// for the next connect, which loads every channel opened this way.
    /// What the device cache kept of it shows at once.
    public func channel(_ cid: ChannelID) -> ChannelController {
        openChannels.insert(cid)
        if models[cid] == nil { models[cid] = ChannelModel(cid: cid) }
        if models[cid]?.hasOlderInCache == true {
            Task { await self.restoreCachedMessages(cid) }
        }
        return ChannelController(cid: cid, client: self)
    }

    func state(of cid: ChannelID) throws -> ChatChannel {
        guard let session else { throw TicksClientError.notConnected }
        let model = models[cid] ?? ChannelModel(cid: cid)
        return model.snapshot(
            currentUserID: session.userID, currentUser: me, outbox: outboxEntries(in: cid),
            policy: configuration.groupPolicy)
    }

    func updates(of cid: ChannelID) -> AsyncStream<ChatChannel> {
        let broadcast = channelBroadcasts[cid] ?? Broadcast<ChatChannel>(bufferSize: 64)
        channelBroadcasts[cid] = broadcast
        return broadcast.subscribe(startingWith: try? state(of: cid))
    }

    /// A channel changed: its subscribers, the lists that show it (or now
    /// should) and the cache hear of it.
    func publish(_ cid: ChannelID) {
        summaries[cid] = nil
        noteChangedForCache(cid)
        updateLists(for: cid)
        guard let broadcast = channelBroadcasts[cid], broadcast.subscriberCount > 0,
            let snapshot = try? state(of: cid)
        else { return }
        broadcast.yield(snapshot)
    }

    /// Fetches the channel's state; creates the channel with `members` if it
    /// does not exist and members are given. With the server out of reach,
    /// a channel the device cache kept shows what it kept (and is loaded
    /// again after the next connect) rather than failing.
    func load(_ cid: ChannelID, members: [String]? = nil) async throws {
        guard let session else { throw TicksClientError.notConnected }
        openChannels.insert(cid)
        await restoreCachedMessages(cid)
        do {
            try await fetch(cid, members: members, session: session)
        } catch let error as TicksClientError where error.isTransient && models[cid]?.isLoaded == true {
            logger.debug("showing the cached channel", metadata: ["cid": "\(cid)", "error": "\(error)"])
        }
    }

    /// The channel's newest messages and read states from the server.
    func fetch(_ cid: ChannelID, members: [String]?, session: Session) async throws {
        loadsInFlight[cid, default: 0] += 1
        defer {
            loadsInFlight[cid, default: 1] -= 1
            if loadsInFlight[cid] == 0 {
                loadsInFlight[cid] = nil
                eventsDuringLoad[cid] = nil
            }
        }
        let state = try await session.api.queryChannel(
            cid, messageLimit: configuration.messagePageSize, members: members)
        guard self.session?.userID == session.userID else { return }
        await absorb(state, session: session, replaying: eventsDuringLoad[cid] ?? [])
    }

    /// Takes a channel's state from the server (a load, or a list's page).
    /// Events that arrived while it was on its way may be newer than it:
    /// they are applied again (cursor moves are forward-only, so this is
    /// safe; their receipts were already reported).
    func absorb(_ state: ChannelState, session: Session, replaying events: [Event] = [], pageSize: Int? = nil) async {
        let cid = state.channel.cid
        typeConfigs[cid.type] = state.channel.config
        var model = models[cid] ?? ChannelModel(cid: cid)
        let missed = model.load(state, currentUserID: session.userID)
        if state.messages.count < (pageSize ?? configuration.messagePageSize), !model.hasOlderInCache {
            model.hasOlderMessages = false
        }
        for event in events {
            _ = model.apply(event, currentUserID: session.userID)
        }
        models[cid] = model
        for receipt in missed { receiptBroadcast.yield(receipt) }
        // Messages the server has that the outbox still holds were sent (a lost answer).
        for message in state.messages where message.user.id == session.userID && local[message.id] != nil {
            await acknowledge(message.id)
        }
        publish(cid)
        if let message = model.undeliveredFromOthers(currentUserID: session.userID) {
            noteArrived(message, in: cid)
        }
    }

    /// Up to `limit` messages older than the oldest loaded one: from the
    /// device cache when it has them, else from the server (`id_lt`), with
    /// their receipts. Returns how many were added (0: the beginning).
    func loadOlder(_ cid: ChannelID, limit: Int) async throws -> Int {
        guard let session else { throw TicksClientError.notConnected }
        let before = models[cid]?.messages.count ?? 0
        await restoreCachedMessages(cid)
        let restored = (models[cid]?.messages.count ?? 0) - before
        if restored > 0 { return restored }
        guard let model = models[cid], model.isLoaded else {
            try await load(cid)
            return models[cid]?.messages.count ?? 0
        }
        guard let oldest = model.messages.first, model.hasOlderMessages else { return 0 }
        let page = try await session.api.queryChannel(cid, messageLimit: limit, before: oldest.id)
        guard var current = models[cid] else { return 0 }
        let added = current.prependOlder(page.messages)
        if page.messages.count < limit { current.hasOlderMessages = false }
        models[cid] = current
        publish(cid)
        return added
    }

    /// Reloads a channel soon, once, however many events ask for it.
    func scheduleReload(_ cid: ChannelID, delay: Duration) {
        guard reloads[cid] == nil, let session else { return }
        reloads[cid] = Task {
            try? await self.time.sleep(for: delay)
            do {
                try await self.fetch(cid, members: nil, session: session)
            } catch {
                self.logger.debug("could not reload a channel", metadata: ["cid": "\(cid)", "error": "\(error)"])
            }
            self.reloadFinished(cid)
        }
    }

    private func reloadFinished(_ cid: ChannelID) {
        reloads[cid] = nil
    }
}
