import Synchronization

/// Whether this node should be sent new requests (`GET /ready`): not once it
/// drains (graceful shutdown began: SIGTERM), and not while its store is
/// known to be away (`StoreHealth`), which the route reads itself. A balancer
/// that checks it takes the node out before its answers would be 503s, and
/// back in once they would not (docs/operations.md, "Readiness").
public final class NodeReadiness: Sendable {
    private let draining = Atomic<Bool>(false)

    public init() {}

    /// Graceful shutdown began: the node finishes what it has and takes nothing new.
    func drain() { draining.store(true, ordering: .relaxed) }

    public var isDraining: Bool { draining.load(ordering: .relaxed) }
}
