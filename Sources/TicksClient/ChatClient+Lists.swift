import Foundation
import TicksProtocol

/// The current user's unread totals over all their channels.
public struct ChatUnreadTotals: Sendable, Equatable {
    /// Unread messages in all channels together.
    public var totalUnreadCount: Int
    /// Channels with at least one unread message.
    public var unreadChannels: Int
    /// Threads with unread replies, once an event has told it
    /// (`notification.mark_threads_read`, or ``ChatClient/markAllThreadsRead()``); nil before.
    public var unreadThreads: Int?

    public init(totalUnreadCount: Int, unreadChannels: Int, unreadThreads: Int? = nil) {
        self.totalUnreadCount = totalUnreadCount
        self.unreadChannels = unreadChannels
        self.unreadThreads = unreadThreads
    }
}

/// Channel lists, unread totals, mark all read and the user's receipt privacy.
extension ChatClient {
    // MARK: Channel lists

    /// A live list of the current user's channels matching `filter`, in
    /// `sort`'s order (the newest message first by default). Asking again
    /// for the same filter and order gives the same list. Call `load()`.
    public func channels(
        filter: ChannelListFilter = .all, sort: [ChannelListSort] = [.lastMessageAt]
    ) -> ChannelListController {
        let query = ChannelListQuery(filter: filter, sort: sort)
        if lists[query] == nil { lists[query] = ChannelListState() }
        return ChannelListController(client: self, filter: filter, sort: sort)
    }

    func listState(_ query: ChannelListQuery) -> ChatChannelList {
        let list = lists[query] ?? ChannelListState()
        return ChatChannelList(
            channels: list.cids.compactMap(summary), hasMore: list.hasMore, isLoaded: list.isLoaded,
            totalUnreadCount: totals.totalUnreadCount, unreadChannels: totals.unreadChannels)
    }

    func listUpdates(_ query: ChannelListQuery) -> AsyncStream<ChatChannelList> {
        if lists[query] == nil { lists[query] = ChannelListState() }
        return lists[query]!.broadcast.subscribe(startingWith: listState(query))
    }

    /// The first page (or the next): from the server, after showing what
    /// the cache kept for a first page.
    func loadList(_ query: ChannelListQuery, more: Bool) async throws {
        guard let session else { throw TicksClientError.notConnected }
        var list = lists[query] ?? ChannelListState()
        if !more, !list.isLoaded {
            // What the device kept shows at once.
            list.cids = models.keys.filter { belongs($0, in: query) }
            list.isLoaded = !list.cids.isEmpty
            lists[query] = list
            sortList(query)
            publishList(query)
        }
        let pageSize = max(1, min(configuration.channelListPageSize, 30))
        let offset = more ? (lists[query]?.cids.count ?? 0) : 0
        let states: [ChannelState]
        do {
            states = try await session.api.queryChannels(
                of: session.userID, filter: query.filter, sort: query.sort, limit: pageSize, offset: offset,
                messageLimit: configuration.channelListMessageLimit)
        } catch let error as TicksClientError where error.isTransient && !more && lists[query]?.isLoaded == true {
            logger.debug("showing the cached channel list", metadata: ["error": "\(error)"])
            return
        }
        guard self.session?.userID == session.userID else { return }
        for state in states {
            await absorb(state, session: session, pageSize: configuration.channelListMessageLimit)
        }
        list = lists[query] ?? ChannelListState()
        let page = states.map(\.channel.cid)
        list.cids = more ? list.cids + page.filter { !list.cids.contains($0) } : page
        list.hasMore = states.count == pageSize
        list.isLoaded = true
        list.isFresh = true
        lists[query] = list
        sortList(query)
        publishList(query)
    }

    /// Whether a channel known here belongs in a list: the user is a member and the filter takes it.
    private func belongs(_ cid: ChannelID, in query: ChannelListQuery) -> Bool {
        guard let model = models[cid], model.isMember, model.channel != nil else { return false }
        return query.filter.matches(cid)
    }

    /// A channel changed: it joins the lists it now belongs in (when it sorts
    /// among the loaded part), leaves those it no longer does, moves within the rest.
    func updateLists(for cid: ChannelID) {
        for query in Array(lists.keys) {
            guard var list = lists[query], list.isLoaded else { continue }
            let present = list.cids.contains(cid)
            let belongs = belongs(cid, in: query)
            if present, !belongs {
                list.cids.removeAll { $0 == cid }
            } else if !present, belongs, let added = summary(cid) {
                let last = list.cids.last.flatMap(summary)
                if !list.hasMore || last.map({ query.inOrder(added, $0) }) ?? true { list.cids.append(cid) }
            } else if !present {
                continue
            }
            lists[query] = list
            sortList(query)
            publishList(query)
        }
    }

    private func sortList(_ query: ChannelListQuery) {
        guard var list = lists[query] else { return }
        let rows = list.cids.compactMap(summary)
        list.cids = rows.sorted(by: query.inOrder).map(\.cid)
        lists[query] = list
    }

    func publishList(_ query: ChannelListQuery) {
        guard let broadcast = lists[query]?.broadcast, broadcast.subscriberCount > 0 else { return }
        broadcast.yield(listState(query))
    }

    /// The channel's row, made again only after it changed.
    func summary(_ cid: ChannelID) -> ChatChannelSummary? {
        if let known = summaries[cid] { return known }
        guard let session, let model = models[cid] else { return nil }
        let made = model.summary(
            currentUserID: session.userID, currentUser: me, outbox: outboxEntries(in: cid),
            policy: configuration.groupPolicy)
        summaries[cid] = made
        return made
    }

    // MARK: Unread totals

    /// The current user's unread totals now (from the server's `me` and every event that carries them).
    public var unreadTotals: ChatUnreadTotals { totals }

    /// The totals now, then every change: for an app icon's badge.
    public func unreadTotalsUpdates() -> AsyncStream<ChatUnreadTotals> {
        totalsBroadcast.subscribe(startingWith: totals)
    }

    func setTotals(_ new: ChatUnreadTotals) {
        guard new != totals else { return }
        totals = new
        totalsBroadcast.yield(new)
        for query in lists.keys { publishList(query) }
    }

    /// Marks every channel of the current user read (`POST /channels/read`).
    /// Every loaded channel shows it at once; the server's events follow.
    public func markAllRead() async throws {
        guard let session else { throw TicksClientError.notConnected }
        try await session.api.markAllRead()
        let now = Timestamp.now()
        for cid in Array(models.keys) {
            guard var model = models[cid], model.markedAllRead(currentUserID: session.userID, at: now) else { continue }
            models[cid] = model
            publish(cid)
        }
        setTotals(ChatUnreadTotals(totalUnreadCount: 0, unreadChannels: 0, unreadThreads: totals.unreadThreads))
    }

    /// Marks every thread of the current user read (`POST /threads/read`), in
    /// one call however many there are; the channels' read states do not
    /// move. The totals' `unreadThreads` is 0 at once; the user's other
    /// devices hear `notification.mark_threads_read`. How many threads moved.
    @discardableResult
    public func markAllThreadsRead() async throws -> Int {
        guard let session else { throw TicksClientError.notConnected }
        let marked = try await session.api.markAllThreadsRead()
        setTotals(
            ChatUnreadTotals(
                totalUnreadCount: totals.totalUnreadCount, unreadChannels: totals.unreadChannels, unreadThreads: 0))
        return marked
    }

    // MARK: Receipt privacy

    /// Whether others may see the current user's reads and deliveries (R10),
    /// as the server last said; both true until it has.
    public var receiptPrivacy: (sharesReads: Bool, sharesDeliveries: Bool) {
        (me?.sharesReadReceipts ?? true, me?.sharesDeliveryReceipts ?? true)
    }

    /// Turns the current user's read and delivery receipts on or off for
    /// everyone else (R10). Their own unread counts work either way; with
    /// `delivery` off this device stops marking messages delivered.
    public func setReceiptPrivacy(read: Bool, delivery: Bool) async throws {
        guard let session else { throw TicksClientError.notConnected }
        let settings = PrivacySettings(
            readReceipts: .init(enabled: read), deliveryReceipts: .init(enabled: delivery))
        if let user = try await session.api.setPrivacy(of: session.userID, settings) {
            me = user
        } else {
            var user = me ?? User(id: session.userID)
            user.privacySettings = settings
            me = user
        }
    }
}
