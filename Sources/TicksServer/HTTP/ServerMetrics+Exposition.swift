extension ServerMetrics {
    /// The Prometheus text, with the gauges that are read on demand brought up to date first.
    func exposition(store: any TicksStore) async -> String {
        if let resident = Self.residentMemoryBytes() { residentMemory.record(resident) }
        cpuSeconds.record(Self.cpuSeconds())
        if let size = try? await store.storageBytes() { storeSize.record(size) }
        if let oldest = try? await store.oldestReceiptMove() { recordOldestReceiptMove(oldest) }
        if let store = store as? SQLStore, let counts = try? await store.outboxCounts() {
            outboxCalls("waiting").record(counts.waiting)
            outboxCalls("dead").record(counts.dead)
        }
        return registry.emitToString()
    }
}
