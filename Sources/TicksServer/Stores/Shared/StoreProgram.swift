/// A store operation written once for every database: the statements it
/// runs and what it decides between them, as a value.
///
/// SQLite answers synchronously inside its writer, PostgreSQL over the
/// network: the same operation cannot be one function for both (a GRDB
/// transaction is a synchronous closure, a postgres-nio one is `async`). So
/// an operation is a program — run this statement, then continue with its
/// rows — and each engine is a small loop that runs programs (`StoreEngine`),
/// knowing nothing of what they do. The decisions stay pure (`StoreRules`,
/// `ReceiptRules`), the SQL is `StoreSQL`'s, and a transaction that must run
/// again (a PostgreSQL deadlock) runs the same program again.
indirect enum StoreProgram<Result> {
    /// Finished, with its result.
    case done(Result)
    /// Run the statement, then continue with what it returned.
    case step(StoreQuery, ([any StoreRow]) throws -> StoreProgram<Result>)

    /// Continues with `next` once this program has its result.
    func then<Next>(_ next: @escaping (Result) throws -> StoreProgram<Next>) -> StoreProgram<Next> {
        switch self {
        case .done(let result):
            // Deferred into a step-less program so that `next` throws where the engine runs it.
            return .defer { try next(result) }
        case .step(let query, let continuation):
            return .step(query) { rows in try continuation(rows).then(next) }
        }
    }

    func map<Next>(_ transform: @escaping (Result) throws -> Next) -> StoreProgram<Next> {
        then { .done(try transform($0)) }
    }

    /// A program that decides what to do when the engine runs it (and may throw there).
    static func `defer`(_ make: @escaping () throws -> StoreProgram<Result>) -> StoreProgram<Result> {
        .step(.nothing) { _ in try make() }
    }
}

/// The steps programs are made of.
enum Step {
    /// The rows of one statement.
    static func rows(_ query: StoreQuery) -> StoreProgram<[any StoreRow]> { .step(query) { .done($0) } }

    /// The first row of one statement, if any.
    static func row(_ query: StoreQuery) -> StoreProgram<(any StoreRow)?> { .step(query) { .done($0.first) } }

    /// A statement run for its effect.
    static func execute(_ query: StoreQuery) -> StoreProgram<Void> { .step(query) { _ in .done(()) } }

    /// Each element's program in turn; their results in order.
    static func each<Element, Value>(
        _ elements: some Sequence<Element>, _ body: @escaping (Element) throws -> StoreProgram<Value>
    ) -> StoreProgram<[Value]> {
        // By index, not by consuming a list: a program may run again (a retried transaction).
        let elements = Array(elements)
        func next(_ index: Int, _ done: [Value]) -> StoreProgram<[Value]> {
            guard index < elements.count else { return .done(done) }
            return .defer { try body(elements[index]).then { next(index + 1, done + [$0]) } }
        }
        return next(0, [])
    }
}

extension StoreQuery {
    /// No statement: the engines skip it (`StoreProgram.defer`).
    static let nothing = StoreQuery(parts: [])

    var isNothing: Bool { parts.isEmpty }
}
