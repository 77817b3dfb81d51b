extension ServerMetrics {
    /// The Prometheus text, with the gauges that are read on demand brought up to date first.
    func exposition(
        store: any TicksStore, health: StoreHealth, outbox: any WebhookOutbox, readiness: NodeReadiness
    ) async -> String {
        requestsInFlight.record(readiness.requestsInFlight)
        if let resident = Self.residentMemoryBytes() { residentMemory.record(resident) }
        cpuSeconds.record(Self.cpuSeconds())
        let since = health.unreachableSince
        storeReachable.record(since == nil ? 1 : 0)
        storeUnreachableSince.record(since.map { Double($0.microseconds) / 1_000_000 } ?? 0)
        storeUnavailableCalls.record(health.unavailableCalls)
        storeTimedOutCalls.record(health.timedOutCalls)
        for reason in StoreRetry.allCases { storeRetries[reason.rawValue]?.record(health.retries(reason)) }
        // While the store is away the figures it gives are left as they were, not waited for.
        guard since == nil else { return registry.emitToString() }
        if let size = try? await store.storageBytes() { storeSize.record(size) }
        if let oldest = try? await store.oldestReceiptMove() { recordOldestReceiptMove(oldest) }
        if let counts = try? await outbox.outboxCounts() {
            outboxCalls("waiting").record(counts.waiting)
            outboxCalls("dead").record(counts.dead)
        }
        return registry.emitToString()
    }
}
