import ServiceLifecycle
import Synchronization

/// Whether this node should be sent new requests (`GET /ready`): not once it
/// drains (graceful shutdown began: SIGTERM), and not while its store is
/// known to be away (`StoreHealth`), which the route reads itself. A balancer
/// that checks it takes the node out before its answers would be 503s, and
/// back in once they would not (docs/operations.md, "Readiness").
///
/// It also knows what a stopping node still waits for: the requests in its
/// handlers and the services of its group that have not ended (`tracked`), so
/// that a shutdown that overruns its bound can say what held it (`ticks serve`).
public final class NodeReadiness: Sendable {
    private let draining = Atomic<Bool>(false)
    private let drained: AsyncStream<Void>
    private let drainedContinuation: AsyncStream<Void>.Continuation
    private let requests = Atomic<Int>(0)
    /// The tracked services running, by name, with how many of each.
    private let services = Mutex<[String: Int]>([:])

    public init() {
        (drained, drainedContinuation) = AsyncStream.makeStream(of: Void.self)
    }

    /// Graceful shutdown began: the node finishes what it has and takes nothing new.
    func drain() {
        draining.store(true, ordering: .relaxed)
        drainedContinuation.finish()
    }

    public var isDraining: Bool { draining.load(ordering: .relaxed) }

    /// Returns once the node drains (at once if it does already); one caller at a time.
    func waitUntilDraining() async {
        for await _ in drained {}
    }

    /// A request entered the handlers (`RequestMetricsMiddleware`), or left them.
    func requestStarted() { requests.add(1, ordering: .relaxed) }
    func requestEnded() { requests.subtract(1, ordering: .relaxed) }

    /// Requests in the handlers now.
    var requestsInFlight: Int { requests.load(ordering: .relaxed) }

    /// `service`, which counts as unfinished, under `name`, while its `run()` runs.
    func tracked(_ service: any Service, name: String) -> any Service {
        TrackedService(base: service, name: name, readiness: self)
    }

    /// What has not ended: "requests in flight: N" when some are, and the tracked services still running.
    var unfinished: [String] {
        let inFlight = requestsInFlight
        let running = services.withLock { $0.flatMap { name, count in Array(repeating: name, count: count) } }
        return (inFlight > 0 ? ["requests in flight: \(inFlight)"] : []) + running.sorted()
    }

    fileprivate func started(_ name: String) { services.withLock { $0[name, default: 0] += 1 } }

    fileprivate func ended(_ name: String) {
        services.withLock { running in
            running[name, default: 1] -= 1
            if running[name] == 0 { running[name] = nil }
        }
    }
}

/// Runs `base`, telling `readiness` while it runs.
private struct TrackedService: Service, CustomStringConvertible {
    let base: any Service
    let name: String
    let readiness: NodeReadiness

    var description: String { name }

    func run() async throws {
        readiness.started(name)
        defer { readiness.ended(name) }
        try await base.run()
    }
}
