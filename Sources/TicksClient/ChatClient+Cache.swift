import Foundation
import TicksProtocol

/// The device cache and catching up after being offline: what the client
/// knew shows at once when the app opens, and after every connect one
/// `POST /sync` per 255 known channels brings it up to date.
extension ChatClient {
    // MARK: The device cache

    /// The channels the cache kept for `userID` become the client's state (not yet synced).
    func restoreFromCache(_ userID: String) async {
        do {
            let heads = try await cache.heads(of: userID)
            syncedThrough = try await cache.syncedThrough(of: userID)
            var unread = ChatUnreadTotals(totalUnreadCount: 0, unreadChannels: 0)
            for (cid, head) in heads where models[cid] == nil {
                let model = ChannelModel(cid: cid, cached: head)
                models[cid] = model
                let count = model.reads[userID]?.unreadMessages ?? 0
                unread.totalUnreadCount += count
                unread.unreadChannels += count > 0 ? 1 : 0
            }
            // Until the server says otherwise, the totals are what the cached channels add up to.
            setTotals(unread)
        } catch {
            logger.warning("the channel cache could not be read", metadata: ["error": "\(error)"])
        }
    }

    /// The older messages the cache kept of a channel, joined to the loaded ones.
    func restoreCachedMessages(_ cid: ChannelID) async {
        guard let session, models[cid]?.hasOlderInCache == true else { return }
        let cached: [Message]
        do {
            cached = try await cache.messages(of: session.userID, in: cid)
        } catch {
            logger.warning("the channel cache could not be read", metadata: ["cid": "\(cid)", "error": "\(error)"])
            return
        }
        guard var model = models[cid], model.hasOlderInCache else { return }
        model.prependCached(cached)
        models[cid] = model
        publish(cid)
    }

    func noteChangedForCache(_ cid: ChannelID) {
        changedSinceFlush.insert(cid)
        guard cacheFlush == nil else { return }
        let delay = configuration.cacheWriteDelay
        cacheFlush = Task {
            try? await self.time.sleep(for: delay)
            guard !Task.isCancelled else { return }
            self.cacheFlush = nil
            await self.writeCache()
        }
    }

    /// Writes what changed to the device cache now (it is written a moment
    /// after every change anyway): call it when the app goes to the background.
    public func flushCache() async {
        cacheFlush?.cancel()
        cacheFlush = nil
        await writeCache()
    }

    private func writeCache() async {
        guard let userID = session?.userID else { return }
        let changed = changedSinceFlush
        changedSinceFlush = []
        var kept: [CachedChannel] = []
        var dropped: [ChannelID] = []
        for cid in changed {
            // Older messages still only in the cache join first, or writing would lose them.
            await restoreCachedMessages(cid)
            guard let model = models[cid] else {
                dropped.append(cid)  // forgotten
                continue
            }
            if let cached = model.cached {
                kept.append(cached)
            } else if !model.isMember {
                dropped.append(cid)
            }
        }
        do {
            if !kept.isEmpty || !dropped.isEmpty { try await cache.save(kept, removing: dropped, of: userID) }
            if isCaughtUp, let syncedThrough { try await cache.setSyncedThrough(syncedThrough, of: userID) }
        } catch {
            logger.warning("the channel cache could not be written", metadata: ["error": "\(error)"])
        }
    }

    // MARK: Catching up

    /// After a connect: the events missed in every channel known here, from
    /// `POST /sync` since the cache was last in step (less a margin: events
    /// seen twice change nothing). When sync cannot tell, the channels on
    /// show (open or in a list) load again and the rest are forgotten. Only
    /// once everything known is current does the point to sync from move on.
    func catchUp(_ session: Session) async {
        let socket = socketsEnded
        let known = models.filter { $0.value.isLoaded && $0.value.isMember }.map(\.key)
        var caughtUp = known.isEmpty
        if !caughtUp, let since = syncedThrough {
            let (seconds, attoseconds) = configuration.syncOverlap.components
            let overlap = seconds * 1_000_000 + attoseconds / 1_000_000_000_000
            do {
                try await sync(known, since: Timestamp(microseconds: since.microseconds - overlap), session)
                caughtUp = true
            } catch let error as TicksClientError where !error.isTransient {
                // Too long away (or a server without sync): start again from the server.
                logger.info("sync refused; loading the channels again", metadata: ["error": "\(error)"])
                try? await cache.clear(of: session.userID)
            } catch {
                logger.debug("sync failed; loading the shown channels again", metadata: ["error": "\(error)"])
            }
        }
        guard self.session?.userID == session.userID else { return }
        if !caughtUp { caughtUp = await reloadShown(known, session) }
        for cid in openChannels where models[cid]?.isLoaded != true { scheduleReload(cid, delay: .zero) }
        for (query, list) in lists where list.isLoaded && !list.isFresh {
            Task { try? await self.loadList(query, more: false) }
        }
        // A socket that ended meanwhile may have missed events this catch-up did not see: the next one's covers them.
        if caughtUp, socketsEnded == socket {
            isCaughtUp = true
            if let connectedAt, syncedThrough.map({ $0 < connectedAt }) ?? true { syncedThrough = connectedAt }
            await flushCache()
        }
    }

    /// Loads again every known channel that is open or in a list; forgets
    /// the others, which nothing vouches for now. True when all loaded.
    private func reloadShown(_ known: [ChannelID], _ session: Session) async -> Bool {
        let listed = Set(lists.values.flatMap(\.cids))
        var complete = true
        for cid in known {
            guard openChannels.contains(cid) || listed.contains(cid) else {
                forget(cid)
                continue
            }
            complete = await reload(cid, session) && complete
        }
        return complete
    }

    /// Loads a channel again; one the server refuses (left, deleted) is
    /// forgotten. False when it could not be reached.
    private func reload(_ cid: ChannelID, _ session: Session) async -> Bool {
        do {
            try await fetch(cid, members: nil, session: session)
            return true
        } catch let error as TicksClientError where !error.isTransient {
            forget(cid)
            return true
        } catch {
            return false
        }
    }

    /// Drops a channel from the client's state, its lists and the cache.
    func forget(_ cid: ChannelID) {
        models[cid] = nil
        publish(cid)
    }

    /// `POST /sync` for `cids`, 255 a call, following `remaining_cids`; the
    /// events go through `handle` as live ones do, channels named in
    /// `reload_cids` load again (it fails if one cannot be reached).
    private func sync(_ cids: [ChannelID], since: Timestamp, _ session: Session) async throws {
        var pending = cids
        while !pending.isEmpty {
            let batch = Array(pending.prefix(255))
            pending.removeFirst(batch.count)
            let reply = try await session.api.sync(batch, since: since)
            for event in reply.events { await handle(event) }
            let reload = reply.reloadCIDs.compactMap(ChannelID.init(cid:))
            for cid in reload where !(await self.reload(cid, session)) {
                throw TicksClientError.unreachable("\(cid) could not be loaded again")
            }
            let remaining = reply.remainingCIDs.compactMap(ChannelID.init(cid:))
            pending = remaining + pending
            // The others are now as the server has them.
            for cid in batch where !reload.contains(cid) && !remaining.contains(cid) && models[cid]?.isFresh == false {
                models[cid]?.isFresh = true
                publish(cid)
            }
        }
    }
}
