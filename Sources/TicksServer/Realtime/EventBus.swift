/// Carries events between the nodes that share one store: every node sends
/// its own connections' frames itself and hands them to the bus for the
/// connections on the others.
public protocol EventBus: Sendable {
    /// Queues `frame` for the connections of `userIDs` on the other nodes. Never waits.
    func publish(_ frame: String, to userIDs: [String])
    /// Until cancelled: hands what the other nodes publish to `hub`.
    func run(hub: ConnectionHub) async throws
}
