/// Carries events between the nodes that share one store: every node sends
/// its own connections' frames itself and hands them to the bus for the
/// connections on the others.
public protocol EventBus: Sendable {
    /// Queues `event` for the connections of `userIDs` on the other nodes.
    /// Never waits; an event it cannot deliver makes those users' connections
    /// on the other nodes close, so their clients resync.
    func publish(_ event: EncodedEvent, to userIDs: [String])
    /// Until cancelled: hands what the other nodes publish to `hub`.
    func run(hub: ConnectionHub) async throws
}
