import Foundation
import TicksProtocol

/// Events from the socket (and from `POST /sync`, and the server's answers
/// to this client's own calls), applied to the client's state in the order
/// they arrive.
extension ChatClient {
    func handle(_ event: Event) async {
        guard let session else { return }
        if isCaughtUp, syncedThrough.map({ $0 < event.createdAt }) ?? true { syncedThrough = event.createdAt }
        if event.type == .healthCheck {
            if let me = event.me {
                self.me = me.user
                setTotals(
                    ChatUnreadTotals(
                        totalUnreadCount: me.totalUnreadCount, unreadChannels: me.unreadChannels,
                        unreadThreads: totals.unreadThreads))
            }
            if let connectionID = event.connectionID, !status.isConnected {
                connectedAt = event.createdAt
                setStatus(.connected(connectionID: connectionID))
                didConnect()
            }
            return
        }
        if let total = event.totalUnreadCount {
            setTotals(
                ChatUnreadTotals(
                    totalUnreadCount: total, unreadChannels: event.unreadChannels ?? totals.unreadChannels,
                    unreadThreads: event.unreadThreads ?? totals.unreadThreads))
        }
        guard let cid = event.cid else { return }
        if event.type == .messageNew, let message = event.message, message.user.id == session.userID,
            local[message.id] != nil
        {
            // Committed on the server (R12): the outbox can let go of it.
            await acknowledge(message.id)
        }
        if loadsInFlight[cid, default: 0] > 0 { eventsDuringLoad[cid, default: []].append(event) }
        var model = models[cid] ?? ChannelModel(cid: cid)
        let outcome = model.apply(event, currentUserID: session.userID)
        models[cid] = model
        for receipt in outcome.receipts { receiptBroadcast.yield(receipt) }
        // A channel heard of but not known here: load it, for the lists it may join.
        let unknown = model.channel == nil && model.isMember && !lists.isEmpty
        if outcome.needsReload || unknown { scheduleReload(cid, delay: .milliseconds(50)) }
        if outcome.changed { publish(cid) }
        if event.type == .messageNew, let message = event.message, message.user.id != session.userID {
            noteArrived(message, in: cid)
        }
    }
}
