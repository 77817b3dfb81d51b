import Synchronization
import TicksProtocol

/// The app's settings as this node applies them: read from the store at
/// most once per `refresh` on the server's clock (another node's change
/// arrives within it), and at once after a change made on this node. The
/// webhooks do not use it: their events read the settings in the change's
/// own transaction (`ChangeRecorder.reads(for:)`).
final class AppOptionsCache: Sendable {
    private let store: any TicksStore
    private let time: TimeSource
    private let refresh: Duration
    private let state = Mutex<(options: AppOptions, readAt: Duration?)>((AppOptions(), nil))

    init(store: any TicksStore, time: TimeSource, refresh: Duration = .seconds(1)) {
        self.store = store
        self.time = time
        self.refresh = refresh
    }

    /// The settings, read again when the last read is `refresh` old.
    func current() async throws -> AppOptions {
        let now = time.now
        let (options, readAt) = state.withLock { $0 }
        if let readAt, now - readAt < refresh { return options }
        let fresh = try await store.appOptions()
        state.withLock { $0 = (fresh, now) }
        return fresh
    }

    /// Changes the settings in the store; this node applies them at once.
    func update(_ change: AppOptions.Change) async throws -> AppOptions {
        let options = try await store.updateAppOptions(change)
        let now = time.now
        state.withLock { $0 = (options, now) }
        return options
    }
}
