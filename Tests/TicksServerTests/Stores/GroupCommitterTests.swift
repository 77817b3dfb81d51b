import Dispatch
import Foundation
import GRDB
import Synchronization
import Testing

@testable import TicksServer

/// `GroupCommitter` on a real GRDB writer, in memory and on disk. A first write
/// holds its transaction open until the test lets it go, and the test knows
/// each later write arrived before it does, so it says exactly which writes
/// shared a transaction; the writer's log shows how each transaction ended.
/// Nothing sleeps or waits for a clock.
@Suite("GroupCommitter")
struct GroupCommitterTests {
    @Test("writes that arrive during a transaction share the next one", arguments: WriterKind.allCases)
    func writesShareATransaction(kind: WriterKind) async throws {
        let database = try Committed(kind)
        let first = try await database.holdTransaction("first")
        let later = [try await database.insert("a"), try await database.insert("b"), try await database.insert("c")]
        first.release()
        #expect(try await first.answer.value == "first")
        for (name, write) in zip(["a", "b", "c"], later) { #expect(try await write.value == name) }
        #expect(database.log.events == ["first", "commit", "a", "b", "c", "commit"])
        #expect(try database.names() == ["first", "a", "b", "c"])
    }

    @Test("maximumBatch caps a transaction; the rest follow in arrival order", arguments: WriterKind.allCases)
    func maximumBatchCapsATransaction(kind: WriterKind) async throws {
        let database = try Committed(kind, maximumBatch: 2)
        let first = try await database.holdTransaction("first")
        var later: [Task<String, any Error>] = []
        for name in ["a", "b", "c", "d", "e"] { later.append(try await database.insert(name)) }
        first.release()
        for write in later { _ = try await write.value }
        #expect(database.log.events == ["first", "commit", "a", "b", "commit", "c", "d", "commit", "e", "commit"])
        #expect(try database.names() == ["first", "a", "b", "c", "d", "e"])
    }

    @Test(
        "a write that throws rolls back only its own changes and gets its own error; the others commit",
        arguments: WriterKind.allCases)
    func throwingWrite(kind: WriterKind) async throws {
        let database = try Committed(kind)
        let first = try await database.holdTransaction("first")
        let a = try await database.insert("a")
        let refused = try await database.insert("refused", thenThrow: Refused(name: "refused"))
        let b = try await database.insert("b")
        first.release()
        #expect(try await a.value == "a")
        await #expect(throws: Refused(name: "refused")) { try await refused.value }
        #expect(try await b.value == "b")
        // It ran (and inserted its row) in the shared transaction, which committed without that row.
        #expect(database.log.events == ["first", "commit", "a", "refused", "b", "commit"])
        #expect(try database.names() == ["first", "a", "b"])
    }

    @Test(
        "a commit that fails fails every write of its transaction; the next one commits",
        arguments: WriterKind.allCases)
    func failingCommit(kind: WriterKind) async throws {
        let database = try Committed(kind)
        let first = try await database.holdTransaction("first")
        let a = try await database.insert("a")
        // A deferred foreign key is checked at COMMIT: the write itself succeeds, its transaction's COMMIT fails.
        let orphan = try await database.insertOrphan("orphan")
        let b = try await database.insert("b")
        first.release()
        #expect(try await first.answer.value == "first")
        // Every caller is answered only after COMMIT (R12): one answered before it would get its value
        // here, though nothing of it was committed.
        for write in [a, orphan, b] {
            let error = await #expect(throws: DatabaseError.self) { try await write.value }
            #expect(error?.extendedResultCode == .SQLITE_CONSTRAINT_FOREIGNKEY)
        }
        let c = try await database.insert("c")
        #expect(try await c.value == "c")
        #expect(database.log.events == ["first", "commit", "a", "orphan", "b", "rollback", "c", "commit"])
        #expect(try database.names() == ["first", "c"])
    }

    @Test(
        "a write that ends the whole transaction fails with the writes before it; those after run in the next",
        arguments: WriterKind.allCases)
    func abortedTransaction(kind: WriterKind) async throws {
        let database = try Committed(kind)
        let first = try await database.holdTransaction("first")
        let a = try await database.insert("a")
        // As SQLite does on a full disk or an I/O error: the transaction is rolled back, savepoints and all.
        let aborting = try await database.insertThenRollBack("aborting")
        let b = try await database.insert("b")
        first.release()
        #expect(try await first.answer.value == "first")
        // a's row went with the transaction: it must not be told it was stored.
        await #expect(throws: (any Error).self) { try await a.value }
        await #expect(throws: (any Error).self) { try await aborting.value }
        #expect(try await b.value == "b")
        #expect(try database.names() == ["first", "b"])
    }

    @Test(
        "a write alone in its transaction (no savepoint) that throws rolls back its changes and gets its own error",
        arguments: WriterKind.allCases)
    func loneThrowingWrite(kind: WriterKind) async throws {
        let database = try Committed(kind)
        // Nothing holds a transaction: each write has one of its own.
        let refused = try await database.insert("refused", thenThrow: Refused(name: "refused"))
        await #expect(throws: Refused(name: "refused")) { try await refused.value }
        let a = try await database.insert("a")
        #expect(try await a.value == "a")
        #expect(database.log.events == ["refused", "rollback", "a", "commit"])
        #expect(try database.names() == ["a"])
    }

    @Test("a write is visible to a fresh connection when its call returns, for every write of a group (R12)")
    func answeredAfterCommit() async throws {
        let database = try Committed(.onDisk)
        let first = try await database.holdTransaction("first")
        let log = database.log
        let path = try #require(database.path)
        var later: [Task<String, any Error>] = []
        for name in ["a", "b", "c"] {
            // The caller, the moment its write returns: a new connection to the file must see the row.
            later.append(
                try await database.insert(name) { name in
                    log.append("answered \(name)")
                    return try Committed.freshRead(of: name, at: path)
                })
        }
        first.release()
        for write in later { #expect(try await write.value == "seen") }
        let events = database.log.events
        let commit = try #require(events.lastIndex(of: "commit"))
        #expect(Array(events[..<commit]) == ["first", "commit", "a", "b", "c"])
        #expect(Set(events[(commit + 1)...]) == ["answered a", "answered b", "answered c"])
    }
}

/// One write's own error.
private struct Refused: Error, Equatable {
    var name: String
}

/// The writers `SQLiteEngine` uses: the same tests run on both.
enum WriterKind: CaseIterable, Sendable {
    /// A `DatabaseQueue` in memory, as the tests' stores have.
    case inMemory
    /// A `DatabasePool` on a file in WAL mode, as the server has.
    case onDisk
}

/// A fresh database behind a `GroupCommitter`, with a table of names and a log of its writer.
private final class Committed {
    let writer: any DatabaseWriter
    let committer: GroupCommitter
    let log: WriterLog
    /// The database file; nil in memory.
    let path: String?
    /// The database file's folder, removed with it.
    private let folder: URL?
    private var arrivals: AsyncStream<Void>.Iterator

    init(_ kind: WriterKind, maximumBatch: Int = 256) throws {
        let writer: any DatabaseWriter
        switch kind {
        case .inMemory:
            folder = nil
            path = nil
            writer = try DatabaseQueue()
        case .onDisk:
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
                "ticks-group-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let path = folder.appendingPathComponent("t.sqlite").path
            self.folder = folder
            self.path = path
            writer = try DatabasePool(path: path)
        }
        try writer.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE names (name TEXT NOT NULL);
                    CREATE TABLE parents (id INTEGER PRIMARY KEY);
                    CREATE TABLE children (
                        name TEXT NOT NULL,
                        parent INTEGER NOT NULL REFERENCES parents (id) DEFERRABLE INITIALLY DEFERRED);
                    """)
        }
        // Added outside any transaction: the log starts with the committer's first write.
        let log = WriterLog()
        writer.writeWithoutTransaction { db in db.add(transactionObserver: log, extent: .databaseLifetime) }
        let (arrivals, arrived) = AsyncStream.makeStream(of: Void.self)
        self.writer = writer
        self.log = log
        self.arrivals = arrivals.makeAsyncIterator()
        committer = GroupCommitter(writer: writer, maximumBatch: maximumBatch) { arrived.yield() }
    }

    deinit {
        if let folder { try? FileManager.default.removeItem(at: folder) }
    }

    /// A write that stays in its transaction until `release()`.
    struct Held {
        let answer: Task<String, any Error>
        let gate: DispatchSemaphore

        func release() { gate.signal() }
    }

    /// Starts a write that inserts `name` and then holds its transaction open; returns once it is in it.
    func holdTransaction(_ name: String) async throws -> Held {
        let gate = DispatchSemaphore(value: 0)
        let (inside, entered) = AsyncStream.makeStream(of: Void.self)
        let answer = try await write(name) { db in
            try Self.insertName(name, db)
            entered.yield()
            // Blocks GRDB's writer thread, not a task: the committer and its callers go on meanwhile.
            gate.wait()
        }
        var iterator = inside.makeAsyncIterator()
        try #require(await iterator.next() != nil)
        return Held(answer: answer, gate: gate)
    }

    /// Inserts `name` through the committer, and throws `error` after when one is given; returns once
    /// the committer holds the write. Its task gives `name`, or what `answered` makes of it in the
    /// caller's task once the write returns.
    func insert(
        _ name: String, thenThrow error: (any Error)? = nil,
        answered: @escaping @Sendable (String) throws -> String = { $0 }
    ) async throws -> Task<String, any Error> {
        try await write(name, answered: answered) { db in
            try Self.insertName(name, db)
            if let error { throw error }
        }
    }

    /// Inserts `name`, then rolls back the whole transaction it runs in.
    func insertThenRollBack(_ name: String) async throws -> Task<String, any Error> {
        try await write(name) { db in
            try Self.insertName(name, db)
            try db.execute(sql: "ROLLBACK")
        }
    }

    /// Inserts a child row whose parent does not exist, which fails its transaction's COMMIT.
    func insertOrphan(_ name: String) async throws -> Task<String, any Error> {
        try await write(name) { db in
            try db.execute(sql: "INSERT INTO children (name, parent) VALUES (?, 42)", arguments: [name])
        }
    }

    /// Runs `body` through the committer under `name`, logged; returns once the committer holds it.
    private func write(
        _ name: String, answered: @escaping @Sendable (String) throws -> String = { $0 },
        _ body: @escaping @Sendable (Database) throws -> Void
    ) async throws -> Task<String, any Error> {
        let committer = committer
        let log = log
        let answer = Task {
            let name = try await committer.write { db in
                log.append(name)
                try body(db)
                return name
            }
            return try answered(name)
        }
        try #require(await arrivals.next() != nil)
        return answer
    }

    private static func insertName(_ name: String, _ db: Database) throws {
        try db.execute(sql: "INSERT INTO names (name) VALUES (?)", arguments: [name])
    }

    /// The names committed, in order.
    func names() throws -> [String] {
        try writer.read { db in try String.fetchAll(db, sql: "SELECT name FROM names ORDER BY rowid") }
    }

    /// "seen" when a new connection to the file at `path` finds `name` committed.
    static func freshRead(of name: String, at path: String) throws -> String {
        let connection = try DatabaseQueue(path: path)
        let count = try connection.read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM names WHERE name = ?", arguments: [name]) ?? 0
        }
        return count == 1 ? "seen" : "not seen"
    }
}

/// What the writer did, in order: the name of each write as it runs, and "commit" or "rollback"
/// as each transaction ends.
private final class WriterLog: TransactionObserver, Sendable {
    private let entries = Mutex<[String]>([])

    var events: [String] { entries.withLock { $0 } }

    func append(_ event: String) { entries.withLock { $0.append(event) } }

    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { false }
    func databaseDidChange(with event: DatabaseEvent) {}
    func databaseDidCommit(_ db: Database) { append("commit") }
    func databaseDidRollback(_ db: Database) { append("rollback") }
}
