extension ServerMetrics {
    /// The Prometheus text, with the gauges that are read on demand brought up to date first.
    func exposition(store: any TicksStore, outbox: any WebhookOutbox) async -> String {
        if let resident = Self.residentMemoryBytes() { residentMemory.record(resident) }
        cpuSeconds.record(Self.cpuSeconds())
        if let size = try? await store.storageBytes() { storeSize.record(size) }
        if let oldest = try? await store.oldestReceiptMove() { recordOldestReceiptMove(oldest) }
        if let counts = try? await outbox.outboxCounts() {
            outboxCalls("waiting").record(counts.waiting)
            outboxCalls("dead").record(counts.dead)
        }
        return registry.emitToString()
    }
}
