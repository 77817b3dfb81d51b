import TicksProtocol

extension Duration {
    /// Whole microseconds (the unit of stored times).
    var wholeMicroseconds: Int64 { components.seconds * 1_000_000 + components.attoseconds / 1_000_000_000_000 }

    /// In seconds, with the fraction (JSON settings, token expiries, rates).
    var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

extension TimeSource {
    /// Whether `condition` came true before `limit` passed on this clock: it runs until it
    /// returns or the limit passes (then it is cancelled, and must return when it is).
    func holds(within limit: Duration, _ condition: @escaping @Sendable () async -> Bool) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask { await condition() && !Task.isCancelled }
            group.addTask { [self] in
                try? await sleep(for: limit)
                return false
            }
            defer { group.cancelAll() }
            return await group.next() ?? false
        }
    }
}
