import Testing

@testable import TicksServer

/// `StoreProgram` and `ProgramRun`, run by a small engine of the test's own
/// that answers each statement with one row holding a number it chose: what
/// runs when, in which order, and again when a transaction is retried.
@Suite("StoreProgram")
struct StoreProgramTests {
    /// Answers a statement `SELECT n` with one row holding n, and logs the statements.
    final class Engine {
        var log: [String] = []

        func run<Result>(_ program: StoreProgram<Result>) throws -> Result {
            var run = ProgramRun(program)
            while let query = try run.nextQuery() {
                guard case .text(let text) = query.parts.first else { throw Unexpected() }
                log.append(text)
                try run.answer([Number(value: Int64(text.dropFirst("SELECT ".count))!)])
            }
            return run.result
        }
    }

    struct Number: StoreRow {
        let value: Int64
        func int(_ index: Int) throws -> Int64 { value }
        func optionalInt(_ index: Int) throws -> Int64? { value }
        func text(_ index: Int) throws -> String { "\(value)" }
        func optionalText(_ index: Int) throws -> String? { "\(value)" }
        func bool(_ index: Int) throws -> Bool { value != 0 }
    }

    struct Unexpected: Error {}
    struct Refused: Error, Equatable { let at: Int64 }

    static func select(_ n: Int64) -> StoreProgram<Int64> {
        Step.row(StoreQuery(stringLiteral: "SELECT \(n)")).map { try $0!.int(0) }
    }

    @Test("statements run in the order the program names them, each continuation with its statement's rows")
    func order() throws {
        let engine = Engine()
        let program = Self.select(1).then { one in
            Self.select(2).then { two in Self.select(one + two) }.map { $0 * 10 }
        }.then { thirty in Self.select(thirty + 4) }
        #expect(try engine.run(program) == 34)
        #expect(engine.log == ["SELECT 1", "SELECT 2", "SELECT 3", "SELECT 34"])
    }

    @Test("deep nesting and long sequences run to the end, in order")
    func deep() throws {
        // 2,000 nested thens, each around the rest.
        func nested(_ depth: Int64) -> StoreProgram<Int64> {
            depth == 0 ? .done(0) : Self.select(depth).then { value in nested(depth - 1).map { $0 + value } }
        }
        let engine = Engine()
        #expect(try engine.run(nested(2000)) == 2000 * 2001 / 2)
        #expect(engine.log.count == 2000)
        #expect(engine.log.first == "SELECT 2000" && engine.log.last == "SELECT 1")

        // Then the same left-nested: each then around all before it.
        var program = Self.select(0)
        for n in Int64(1)...2000 { program = program.then { total in Self.select(n).map { total + $0 } } }
        let second = Engine()
        #expect(try second.run(program) == 2000 * 2001 / 2)
        #expect(second.log == (0...2000).map { "SELECT \($0)" })

        let each = Engine()
        #expect(try each.run(Step.each(Int64(1)...3000) { Self.select($0) }) == Array(1...3000))
        #expect(each.log.count == 3000)
    }

    @Test("a program runs again from the start with the same result (a retried transaction)")
    func runsAgain() throws {
        let program = Step.each([Int64(1), 2, 3]) { n in Self.select(n).map { $0 * 2 } }.then { doubled in
            Self.select(doubled.reduce(0, +)).map { (doubled, $0) }
        }
        let engine = Engine()
        let first = try engine.run(program)
        let second = try engine.run(program)
        #expect(first.0 == [2, 4, 6] && first.1 == 12)
        #expect(second.0 == [2, 4, 6] && second.1 == 12)
        #expect(engine.log == ["SELECT 1", "SELECT 2", "SELECT 3", "SELECT 12"] + ["SELECT 1", "SELECT 2", "SELECT 3", "SELECT 12"])
    }

    @Test("continuations run, and throw, only when the engine runs the program")
    func decisionsRunInTheEngine() throws {
        final class Calls { var count = 0 }
        let calls = Calls()
        let program = StoreProgram<Int64>.done(7).then { seven -> StoreProgram<Int64> in
            calls.count += 1
            return Self.select(seven)
        }.then { value -> StoreProgram<Int64> in
            calls.count += 1
            throw Refused(at: value)
        }
        let deferred = StoreProgram<Int64>.defer {
            calls.count += 1
            return .done(1)
        }
        let each = Step.each([Int64(1)]) { n -> StoreProgram<Int64> in
            calls.count += 1
            return .done(n)
        }
        _ = (deferred, each)
        #expect(calls.count == 0)
        let engine = Engine()
        #expect(throws: Refused(at: 7)) { try engine.run(program) }
        #expect(calls.count == 2)
        #expect(engine.log == ["SELECT 7"])
        #expect(try engine.run(deferred) == 1 && engine.run(each) == [1])
        #expect(calls.count == 4)
    }
}
