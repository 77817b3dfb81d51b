/// A store operation written once for every database: the statements it
/// runs and what it decides between them, as a value.
///
/// SQLite answers synchronously inside its writer, PostgreSQL over the
/// network: the same operation cannot be one function for both (a GRDB
/// transaction is a synchronous closure, a postgres-nio one is `async`). So
/// an operation is a program — run this statement, then continue with its
/// rows — and each engine is a small loop that runs programs
/// (`ProgramRun`), knowing nothing of what they do. The decisions stay pure
/// (`StoreRules`, `ReceiptRules`), the SQL is `StoreSQL`'s, and a
/// transaction that must run again (a PostgreSQL deadlock) runs the same
/// program again.
///
/// `then` costs the same however deep the program nests: it records the
/// continuation once, and the run keeps the continuations waiting on a
/// stack. (Until 2026-11-27 each statement's continuation was wrapped again
/// by every `then` around it, a third of the allocations of a receipt.)
struct StoreProgram<Result> {
    fileprivate let node: ProgramNode

    fileprivate init(_ node: ProgramNode) { self.node = node }

    /// Finished, with its result.
    static func done(_ result: Result) -> StoreProgram { StoreProgram(.done(result)) }

    /// Continues with `next` once this program has its result.
    func then<Next>(_ next: @escaping (Result) throws -> StoreProgram<Next>) -> StoreProgram<Next> {
        StoreProgram<Next>(.then(node) { try next($0 as! Result).node })
    }

    func map<Next>(_ transform: @escaping (Result) throws -> Next) -> StoreProgram<Next> {
        StoreProgram<Next>(.then(node) { .done(try transform($0 as! Result)) })
    }

    /// A program that decides what to do when the engine runs it (and may throw there).
    static func `defer`(_ make: @escaping () throws -> StoreProgram<Result>) -> StoreProgram<Result> {
        StoreProgram(.then(.done(())) { _ in try make().node })
    }
}

/// A program with its types erased, as the engines run it; `StoreProgram`
/// puts the types back at each continuation (`as!` cannot fail: a node's
/// value is always of the type its program is declared with).
private indirect enum ProgramNode {
    /// A value.
    case done(Any)
    /// Run the statement; its value is `value` of the rows.
    case query(StoreQuery, ([any StoreRow]) throws -> Any)
    /// Run `first`, then continue with its value.
    case then(ProgramNode, (Any) throws -> ProgramNode)
}

/// One run of a program in an engine: the engine asks for the next
/// statement, runs it and answers with its rows, until there is none.
///
///     var run = ProgramRun(program)
///     while let query = try run.nextQuery() { try run.answer(rows(query)) }
///     return run.result
struct ProgramRun<Result> {
    private var node: ProgramNode
    /// What waits for the value being computed, innermost last.
    private var continuations: [(Any) throws -> ProgramNode] = []
    /// The statement's value, once it has its rows.
    private var pending: (([any StoreRow]) throws -> Any)?
    private var finished: Any?

    init(_ program: StoreProgram<Result>) {
        node = program.node
        continuations.reserveCapacity(8)
    }

    /// Runs the program's decisions up to its next statement; nil when it has its result.
    mutating func nextQuery() throws -> StoreQuery? {
        precondition(pending == nil, "the statement before has no answer")
        while true {
            switch node {
            case .then(let first, let next):
                continuations.append(next)
                node = first
            case .query(let query, let value):
                pending = value
                return query
            case .done(let value):
                guard let next = continuations.popLast() else {
                    finished = value
                    return nil
                }
                node = try next(value)
            }
        }
    }

    /// The rows of the statement `nextQuery` returned.
    mutating func answer(_ rows: [any StoreRow]) throws {
        guard let value = pending else { preconditionFailure("no statement is waiting for rows") }
        pending = nil
        node = .done(try value(rows))
    }

    /// The program's result, once `nextQuery` returned nil.
    var result: Result { finished as! Result }
}

/// The steps programs are made of.
enum Step {
    /// The rows of one statement.
    static func rows(_ query: StoreQuery) -> StoreProgram<[any StoreRow]> { StoreProgram(.query(query) { $0 }) }

    /// The first row of one statement, if any.
    static func row(_ query: StoreQuery) -> StoreProgram<(any StoreRow)?> {
        StoreProgram(.query(query) { rows in rows.first as (any StoreRow)? as Any })
    }

    /// A statement run for its effect.
    static func execute(_ query: StoreQuery) -> StoreProgram<Void> { StoreProgram(.query(query) { _ in () }) }

    /// Each element's program in turn; their results in order.
    static func each<Element, Value>(
        _ elements: some Sequence<Element>, _ body: @escaping (Element) throws -> StoreProgram<Value>
    ) -> StoreProgram<[Value]> {
        // By index, not by consuming a list, and with the results gathered afresh in each run:
        // a program may run again (a retried transaction).
        let elements = Array(elements)
        return .defer {
            let results = Gathered<Value>()
            results.values.reserveCapacity(elements.count)
            func next(_ index: Int) throws -> StoreProgram<[Value]> {
                guard index < elements.count else { return .done(results.values) }
                return try body(elements[index]).then { value in
                    results.values.append(value)
                    return try next(index + 1)
                }
            }
            return try next(0)
        }
    }

    /// The results of one run of `each` so far.
    private final class Gathered<Value> {
        var values: [Value] = []
    }
}
