/// A store engine whose every call has a deadline (`StoreDeadline`) and
/// whose failures to reach the database are `StoreError.unavailable`, which
/// the HTTP layer answers 503 with `Retry-After`: never a hang, never a 500
/// for a database that is away. Each call's end tells `StoreHealth` whether
/// the store answered.
///
/// Every `SQLStore` runs its engine through one (`SQLStore.init`); only
/// `prepare`, the migrations before the first request, has no deadline.
/// While the store is known to be away and a probe watches it
/// (`StoreHealth.awayWhileProbed()`: PostgreSQL's pool), a call fails at once.
struct BoundedEngine: StoreEngine {
    let base: any StoreEngine
    let deadline: StoreDeadline
    let health: StoreHealth
    /// Set: calls run in the caller's task under this lease, not each in a task of its own
    /// under `deadline` (`within(_:)`).
    private var lease: DeadlineLease?

    init(base: any StoreEngine, deadline: StoreDeadline, health: StoreHealth) {
        self.base = base
        self.deadline = deadline
        self.health = health
    }

    /// This engine with its calls run in the caller's own task under `lease`, for a caller
    /// that can be left where it waits at the deadline (`DeadlineLease`: `MoveBatcher`'s lane).
    func within(_ lease: DeadlineLease) -> BoundedEngine {
        var engine = self
        engine.lease = lease
        return engine
    }

    var dialect: SQLDialect { base.dialect }

    func write<T: Sendable>(_ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T {
        try await bounded { try await base.write(program) }
    }

    func read<T: Sendable>(_ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T {
        try await bounded { try await base.read(program) }
    }

    func readOne<T: Sendable>(_ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T {
        try await bounded { try await base.readOne(program) }
    }

    func writeOne<T: Sendable>(_ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T {
        try await bounded { try await base.writeOne(program) }
    }

    /// The wait for its turn is within the call's deadline: a call left there leaves the queue.
    func write<T: Sendable>(in turn: Turn, _ program: @escaping @Sendable () -> StoreProgram<T>) async throws -> T {
        try await bounded { try await base.write(in: turn, program) }
    }

    func storageBytes() async throws -> Int64 { try await bounded { try await base.storageBytes() } }

    /// The migrations: no deadline (they may be long), but a database that is away is said so.
    func prepare() async throws {
        do {
            try await base.prepare()
        } catch {
            guard let why = base.unavailability(of: error) else { throw error }
            health.failed(why)
            throw StoreError.unavailable(why)
        }
    }

    func unavailability(of error: any Error) -> StoreError.Unavailability? { base.unavailability(of: error) }

    private func bounded<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        // Known to be away, with a probe watching for its return: fail at once, not at the deadline.
        if let why = health.awayWhileProbed() { throw StoreError.unavailable(why) }
        let began = health.began()
        do {
            let value: T
            if let lease {
                // Told at the deadline, not when the work ends (if ever): the lane that takes the
                // left one's place then fails at once, as a caller after `run`'s deadline does.
                let told = lease.expiry.register { [health, deadline] in health.failed(.timedOut(deadline.timeout)) }
                defer { lease.expiry.forget(told) }
                value = try await lease.run(body)
            } else {
                value = try await deadline.run(body)
            }
            health.answered(since: began)
            return value
        } catch let error as StoreError {
            if case .unavailable(let why) = error {
                // A lease left at its deadline told `health` then.
                if lease?.isExpired != true { health.failed(why) }
            } else {
                health.answered(since: began)
            }
            throw error
        } catch {
            guard let why = base.unavailability(of: error) else { throw error }
            health.failed(why)
            throw StoreError.unavailable(why)
        }
    }
}
