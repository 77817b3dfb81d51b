import Synchronization
import TicksProtocol

/// Channel types as last read from the database, so the hot paths (every
/// receipt consults its channel type) skip a query and a JSON decode.
///
/// Channel types change rarely and only through this process's store, which
/// calls `invalidate` after committing a change. A lookup that raced with an
/// invalidation does not store what it read: the generation it started from is
/// stale, so the next lookup reads the committed row.
final class ChannelTypeCache: Sendable {
    private struct State {
        var configs: [String: ChannelConfig] = [:]
        var generation = 0
    }

    private let state = Mutex(State())
    /// Entries kept at most (a config is a few hundred bytes).
    static let maxEntries = 1_000

    func cached(_ name: String) -> ChannelConfig? {
        state.withLock { $0.configs[name] }
    }

    /// The cached config of `name`, or `load`'s answer (cached when nothing changed meanwhile).
    func config(named name: String, load: () throws -> ChannelConfig?) rethrows -> ChannelConfig? {
        let (cached, generation) = state.withLock { state in (state.configs[name], state.generation) }
        if let cached { return cached }
        let loaded = try load()
        if let loaded {
            state.withLock { state in
                guard state.generation == generation else { return }
                // Bounded: types are made by server tokens only, but a cache has a bound whatever feeds it.
                if state.configs.count >= Self.maxEntries { state.configs.removeAll() }
                state.configs[name] = loaded
            }
        }
        return loaded
    }

    /// Forgets every cached type; call after a change to channel types has committed.
    func invalidate() {
        state.withLock { state in
            state.configs.removeAll()
            state.generation += 1
        }
    }
}
