import Foundation
import TicksProtocol

/// An event a change owes the webhooks, found in the change's transaction;
/// for a new message also who should get a push.
struct HookEvent: Sendable {
    var event: Event
    /// The channel it is about: webhooks name its type and id apart too (`channel_type`, `channel_id`).
    var channel: ChannelID
    /// `message.new`: the members to push to (the author left out), before
    /// those with an open socket are taken out.
    var pushCandidates: [RecipientUnread] = []
}

/// A member a push call names; the delivery-only token is added when the call is made.
struct PushRecipient: Codable, Sendable, Equatable {
    var user_id: String
    var unread_count: Int
    var total_unread_count: Int
}

/// What a change writes to the webhook outbox in its own transaction
/// (docs/webhooks.md): the events the settings ask for (`HookEvents`), as
/// calls; nothing is sent from inside a transaction. The store reads what
/// the events need and inserts the calls; `wake` tells this node's sender,
/// after the commit, that there is work.
struct WebhookRecorder: ChangeRecorder {
    let settings: WebhookSettings
    /// Those of the users with no open socket on this node (the push hook names only them).
    let offline: @Sendable ([String]) -> [String]
    let wake: @Sendable () -> Void

    /// Whether any receiver wants events of `type` (so the store need not build them).
    func wants(_ type: EventType) -> Bool {
        settings.webhooks.contains { $0.wants(type) } || (type == .messageNew && settings.pushURL != nil)
    }

    /// What `HookEvents` needs, and for a push receiver the counts of a new message's members (each
    /// is told their own: read in the send's transaction only when a push receiver is set).
    func reads(for change: StoreChange) -> ChangeReads? {
        guard var reads = HookEvents.reads(for: change, wanted: wants) else { return nil }
        if settings.pushURL != nil, case .messageSent(let outcome, let channel) = change, outcome.created,
            outcome.message.parentID == nil || outcome.message.showInChannel
        {
            reads.recipientCounts = channel.pk
        }
        return reads
    }

    func entries(for change: StoreChange, context: ChangeContext) throws -> [OutboxEntry] {
        try entries(for: HookEvents.of(change, context: context, wanted: wants))
    }

    func committed() { wake() }

    /// The outbox calls for `events`.
    func entries(for events: [HookEvent]) throws -> [OutboxEntry] {
        var entries: [OutboxEntry] = []
        for hook in events {
            var event = hook.event
            event.channelType = hook.channel.type
            event.channelID = hook.channel.id
            let type = event.type
            let wanting = settings.webhooks.filter { $0.wants(type) }
            let push = type == .messageNew ? settings.pushURL : nil
            guard !wanting.isEmpty || push != nil else { continue }
            let payload = try JSONCoding.string(event)
            let cid = hook.channel.rawValue
            for webhook in wanting {
                entries.append(
                    OutboxEntry(
                        target: ReceiverURL(webhook.url.absoluteString).name, kind: .webhook, eventType: type.rawValue, cid: cid,
                        payload: payload))
            }
            guard let push else { continue }
            let away = Set(offline(hook.pushCandidates.map(\.userID)))
            let offline = hook.pushCandidates.filter { away.contains($0.userID) }
            var start = 0
            while start < offline.count {
                let chunk = offline[start..<min(start + settings.pushRecipientsPerCall, offline.count)]
                let recipients = chunk.map {
                    PushRecipient(
                        user_id: $0.userID, unread_count: $0.channelUnread, total_unread_count: $0.totals.messages)
                }
                entries.append(
                    OutboxEntry(
                        target: ReceiverURL(push.absoluteString).name, kind: .push, eventType: type.rawValue, cid: cid, payload: payload,
                        recipients: try JSONCoding.string(recipients)))
                start += chunk.count
            }
        }
        return entries
    }
}
