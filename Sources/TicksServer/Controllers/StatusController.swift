import Foundation
import Hummingbird
import TicksProtocol

/// `GET /admin/status` (docs/operations.md, "Watch it"): how this node is
/// doing, for a person at a terminal (`ticks status`) or a script. Server
/// tokens only: it names webhook receivers and counts every user's sockets.
/// Counters are this node's since it started; the store's figures are shared
/// by every node on it.
struct StatusController {
    let store: any TicksStore
    let health: StoreHealth
    let outbox: any WebhookOutbox
    let hub: ConnectionHub
    let bus: (any EventBus)?
    let webhooks: WebhookSender?
    let retention: ReceiptLogRetention
    let time: TimeSource
    let startedAt: Timestamp

    func addRoutes(to group: RouterGroup<TicksRequestContext>) {
        group.on(.getStatus, use: status)
    }

    @Sendable func status(_ request: Request, context: TicksRequestContext) async throws -> Response {
        guard case .server = try context.requirePrincipal() else {
            throw APIError.forbidden("the status view needs a server token")
        }
        let now = time.wallNow
        // While the store is away this answers at once, from what the node knows, without it.
        let unreachableSince = health.unreachableSince
        let reachable = unreachableSince == nil
        let receivers = reachable ? (try? await outbox.outboxTargets()) ?? [] : []
        let status = NodeStatus(
            version: BuildInfo.version, commit: BuildInfo.commit, startedAt: startedAt,
            uptimeSeconds: max(0, (now.microseconds - startedAt.microseconds) / 1_000_000),
            store: .init(
                kind: store.kind.rawValue, reachable: reachable,
                unreachableSince: unreachableSince, unavailableCalls: health.unavailableCalls,
                timedOutCalls: health.timedOutCalls,
                sizeBytes: reachable ? try? await store.storageBytes() : nil,
                oldestReceiptMove: reachable ? (try? await store.oldestReceiptMove()) ?? nil : nil,
                receiptLogRetentionSeconds: retention.window?.components.seconds),
            connections: .init(
                open: hub.connectionCount, users: hub.connectedUserCount, slowClosed: hub.slowClosedCount),
            webhooks: .init(
                enabled: webhooks != nil, sending: webhooks?.isSending ?? false,
                waiting: receivers.reduce(0) { $0 + $1.waiting }, dead: receivers.reduce(0) { $0 + $1.dead },
                receivers: receivers.map {
                    .init(url: ReceiverURL($0.target).redacted, hook: $0.kind, waiting: $0.waiting, dead: $0.dead, oldestWaiting: $0.oldestWaiting)
                }),
            bus: bus?.status,
            process: .init(
                residentMemoryBytes: ServerMetrics.residentMemoryBytes(), cpuSeconds: ServerMetrics.cpuSeconds()))
        return try context.respond(status)
    }
}
