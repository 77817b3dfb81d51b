import GRDB

/// One SQLite connection inside one of the engine's transactions: runs a
/// `StoreProgram`, statement after statement, on the calling thread.
/// Statements are compiled once and kept (GRDB's statement cache), except
/// those with lists of several values, whose text changes with the list's length.
struct SQLiteSession {
    let db: Database

    func run<Result>(_ program: StoreProgram<Result>) throws -> Result {
        var run = ProgramRun(program)
        while let query = try run.nextQuery() {
            // PostgreSQL's advisory locks: SQLite's single writer already serialises changes.
            try run.answer(query.takesAdvisoryLock ? [] : try rows(query))
        }
        return run.result
    }

    func rows(_ query: StoreQuery) throws -> [Row] {
        let (text, bindings) = SQLDialect.sqlite.render(query)
        try bindings.requireStorable()
        let reusable = query.parts.allSatisfy { part in
            if case .list(_, let values) = part { return values.count <= 1 }
            return true
        }
        let statement = reusable ? try db.cachedStatement(sql: text) : try db.makeStatement(sql: text)
        let values: [(any DatabaseValueConvertible)?] = bindings.map { binding in
            switch binding {
            case .value(.int(let value)): value
            case .value(.text(let value)): value
            case .value(.null), .array: nil  // never rendered for SQLite
            }
        }
        return try Row.fetchAll(statement, arguments: StatementArguments(values))
    }
}

extension Row: StoreRow {
    func int(_ index: Int) throws -> Int64 { try decode(Int64.self, atIndex: index) }
    func optionalInt(_ index: Int) throws -> Int64? { try decode(Int64?.self, atIndex: index) }
    func text(_ index: Int) throws -> String { try decode(String.self, atIndex: index) }
    func optionalText(_ index: Int) throws -> String? { try decode(String?.self, atIndex: index) }
    func bool(_ index: Int) throws -> Bool { try decode(Bool.self, atIndex: index) }
}
