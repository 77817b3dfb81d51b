import Tracing

/// A store engine whose transactions and statements are spans (`store.write`,
/// `store.read`), children of the span that awaits them — the HTTP request's.
/// Only work that is part of a trace makes spans: the background loops (the
/// webhook sender, pruning) run with no trace context and pass straight
/// through, so they do not start a trace each round.
///
/// `buildApplication` puts it around the engine only when the server traces
/// (`TicksServerConfiguration.tracing`); otherwise no call pays for it.
struct TracedEngine: StoreEngine {
    let base: any StoreEngine
    /// `db.system` of the spans: "sqlite" or "postgresql".
    let system: String

    init(_ base: any StoreEngine) {
        self.base = base
        self.system = base.dialect == .postgres ? "postgresql" : "sqlite"
    }

    var dialect: SQLDialect { base.dialect }

    func write<T: Sendable>(_ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T {
        try await traced("store.write", "transaction") { try await base.write(program) }
    }

    func read<T: Sendable>(_ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T {
        try await traced("store.read", "transaction") { try await base.read(program) }
    }

    func readOne<T: Sendable>(_ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T {
        try await traced("store.read", "statement") { try await base.readOne(program) }
    }

    func writeOne<T: Sendable>(_ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T {
        try await traced("store.write", "statement") { try await base.writeOne(program) }
    }

    func write<T: Sendable>(in turn: Turn, _ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T {
        try await traced("store.write", "transaction") { try await base.write(in: turn, program) }
    }

    func storageBytes() async throws -> Int64 { try await base.storageBytes() }

    func prepare() async throws { try await base.prepare() }

    func unavailability(of error: any Error) -> StoreError.Unavailability? { base.unavailability(of: error) }

    private func traced<T>(_ name: String, _ unit: String, _ body: () async throws -> T) async throws -> T {
        guard ServiceContext.current != nil else { return try await body() }
        return try await withSpan(name, ofKind: .client) { span in
            span.attributes["db.system"] = system
            span.attributes["ticks.store.unit"] = unit
            return try await body()
        }
    }
}
