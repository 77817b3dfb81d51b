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

    /// The statement's rows, their values copied out of SQLite into one array
    /// (`SQLiteRows`) as the statement steps: not a GRDB `Row` per row, each
    /// with a copy of its own (on the writer, every receipt's dozen statements
    /// pay this).
    func rows(_ query: StoreQuery) throws -> [any StoreRow] {
        let (text, bindings) = SQLDialect.sqlite.render(query)
        try bindings.requireStorable()
        let reusable = query.parts.allSatisfy { part in
            if case .list(_, let values) = part { return values.count <= 1 }
            return true
        }
        let statement = reusable ? try db.cachedStatement(sql: text) : try db.makeStatement(sql: text)
        let values = bindings.map { binding -> DatabaseValue in
            switch binding {
            case .value(.int(let value)): value.databaseValue
            case .value(.text(let value)): value.databaseValue
            case .value(.null), .array: .null  // never rendered for SQLite
            }
        }
        let cursor = try Row.fetchCursor(statement, arguments: StatementArguments(values))
        let width = statement.columnCount
        let rows = SQLiteRows(width: width)
        var found: [any StoreRow] = []
        while let row = try cursor.next() {
            found.append(SQLiteRow(rows: rows, start: rows.values.count))
            for index in 0..<width { rows.values.append(row[index] as DatabaseValue) }
        }
        return found
    }
}

/// The values of one statement's rows, row after row.
final class SQLiteRows {
    let width: Int
    var values: [DatabaseValue] = []

    init(width: Int) { self.width = width }
}

/// One row of `SQLiteRows`, read by position as GRDB's `Row` decodes: an
/// integer from an integer (or a whole real), text from text, a bool from a number.
struct SQLiteRow: StoreRow {
    let rows: SQLiteRows
    let start: Int

    private func value(_ index: Int) throws -> DatabaseValue {
        guard index >= 0, index < rows.width else { throw SQLiteRowError(index: index, expected: "a column") }
        return rows.values[start + index]
    }

    func int(_ index: Int) throws -> Int64 {
        guard let value = try optionalInt(index) else { throw SQLiteRowError(index: index, expected: "an integer") }
        return value
    }

    func optionalInt(_ index: Int) throws -> Int64? {
        switch try value(index).storage {
        case .null: return nil
        case .int64(let value): return value
        case .double(let value):
            guard let whole = Int64(exactly: value) else { throw SQLiteRowError(index: index, expected: "an integer") }
            return whole
        case .string, .blob: throw SQLiteRowError(index: index, expected: "an integer")
        }
    }

    func text(_ index: Int) throws -> String {
        guard let value = try optionalText(index) else { throw SQLiteRowError(index: index, expected: "text") }
        return value
    }

    func optionalText(_ index: Int) throws -> String? {
        switch try value(index).storage {
        case .null: return nil
        case .string(let value): return value
        case .blob(let data): return String(decoding: data, as: UTF8.self)
        case .int64, .double: throw SQLiteRowError(index: index, expected: "text")
        }
    }

    func bool(_ index: Int) throws -> Bool {
        switch try value(index).storage {
        case .int64(let value): return value != 0
        case .double(let value): return value != 0
        case .null, .string, .blob: throw SQLiteRowError(index: index, expected: "a number")
        }
    }
}

/// A column that did not hold what its statement's reader expected.
struct SQLiteRowError: Error, CustomStringConvertible {
    let index: Int
    let expected: String
    var description: String { "column \(index) does not hold \(expected)" }
}
