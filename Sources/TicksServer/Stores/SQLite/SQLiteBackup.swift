import Foundation
import GRDB

/// Online backup and restore of a SQLite data folder (`ticks backup`,
/// `ticks restore`; docs/operations.md, "Back up and restore").
///
/// A backup is SQLite's backup API run inside one read transaction of a
/// connection of its own: in WAL mode that transaction sees one committed
/// state from start to end while the server keeps writing beside it, so the
/// copy is consistent and never restarts, however many steps it takes. Every
/// receipt acknowledged before the backup began is in it (R12: acknowledged
/// means committed). The copy is written beside its destination and renamed
/// into place once complete and on disk: `FILE` is a whole backup or absent.
///
/// A restore checks the file (SQLite's integrity check, a Ticks database,
/// no migration this binary does not know), then puts it in place under the
/// data folder's lock, which a running server holds (`DataDirectoryLock`).
public enum SQLiteBackup {
    /// The database file of a data folder.
    public static func databasePath(in directory: URL) -> URL {
        directory.appendingPathComponent("ticks.sqlite")
    }

    /// How far a backup is.
    public struct Progress: Sendable, Equatable {
        public var copiedPages: Int
        public var totalPages: Int
        public var isCompleted: Bool

        public var fraction: Double { totalPages == 0 ? 1 : Double(copiedPages) / Double(totalPages) }
    }

    /// What a backup or restore did.
    public struct Summary: Sendable {
        public var bytes: Int64
        public var pages: Int
        /// The newest migration in the copied database.
        public var schema: String
    }

    /// Copies the database of `directory` to `destination` while a server may
    /// be writing to it. `pagesPerStep` pages are copied at a time, then
    /// `progress` is told.
    public static func backup(
        dataDirectory directory: URL, to destination: URL, pagesPerStep: Int32 = 1_024,
        progress: @escaping (Progress) -> Void = { _ in }
    ) throws -> Summary {
        let source = databasePath(in: directory)
        guard FileManager.default.fileExists(atPath: source.path) else {
            throw BackupError.noDatabase(source.path)
        }
        let fileManager = FileManager.default
        let partial = destination.deletingLastPathComponent()
            .appendingPathComponent(".\(destination.lastPathComponent).partial")
        try? fileManager.removeItem(at: partial)
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        // Opening does not write: the server's connections already made the file WAL.
        let reader = try DatabasePool(path: source.path, configuration: configuration)
        let schema = try reader.read { db in try Self.schema(of: db, path: source.path) }
        do {
            let copy = try DatabaseQueue(path: partial.path)
            try reader.backup(to: copy, pagesPerStep: pagesPerStep) { step in
                progress(
                    Progress(
                        copiedPages: step.totalPageCount - step.remainingPageCount, totalPages: step.totalPageCount,
                        isCompleted: step.isCompleted))
            }
            // A file that stands alone: no log beside it to carry along.
            let pages = try copy.writeWithoutTransaction { db -> Int in
                try db.execute(sql: "PRAGMA journal_mode = DELETE")
                return try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            }
            try copy.close()
            try reader.close()
            try Self.syncFile(partial)
            if fileManager.fileExists(atPath: destination.path) { try fileManager.removeItem(at: destination) }
            try fileManager.moveItem(at: partial, to: destination)
            try Self.syncFile(destination.deletingLastPathComponent())
            let bytes = (try fileManager.attributesOfItem(atPath: destination.path)[.size] as? Int64) ?? 0
            return Summary(bytes: bytes, pages: pages, schema: schema)
        } catch {
            try? fileManager.removeItem(at: partial)
            throw error
        }
    }

    /// Puts the backup `file` in place as the database of `directory`. Refused
    /// while a server holds the folder, for a file that is not a sound Ticks
    /// database of a schema this binary knows, and over an existing database
    /// unless `replace` (then the old one, with its log, is kept beside it as
    /// `ticks.sqlite.before-restore`).
    public static func restore(from file: URL, dataDirectory directory: URL, replace: Bool) throws -> Summary {
        let fileManager = FileManager.default
        guard fileManager.fileExists(atPath: file.path) else { throw BackupError.noBackup(file.path) }
        try fileManager.createDirectory(at: directory, withIntermediateDirectories: true)
        let lock = try DataDirectoryLock(directory: directory)
        defer { lock.release() }

        let (schema, pages) = try Self.check(file)
        let target = databasePath(in: directory)
        let companions = ["", "-wal", "-shm"].map { URL(fileURLWithPath: target.path + $0) }
        if fileManager.fileExists(atPath: target.path) {
            guard replace else { throw BackupError.databaseExists(target.path) }
            for companion in companions where fileManager.fileExists(atPath: companion.path) {
                let aside = URL(
                    fileURLWithPath: companion.path.replacingOccurrences(
                        of: "ticks.sqlite", with: "ticks.sqlite.before-restore"))
                if fileManager.fileExists(atPath: aside.path) { try fileManager.removeItem(at: aside) }
                try fileManager.moveItem(at: companion, to: aside)
            }
        }
        // A log or shared memory left without its database would be applied to the restored one.
        for companion in companions.dropFirst() where fileManager.fileExists(atPath: companion.path) {
            try fileManager.removeItem(at: companion)
        }
        let partial = directory.appendingPathComponent(".ticks.sqlite.restoring")
        try? fileManager.removeItem(at: partial)
        try fileManager.copyItem(at: file, to: partial)
        try Self.syncFile(partial)
        try fileManager.moveItem(at: partial, to: target)
        try Self.syncFile(directory)
        let bytes = (try fileManager.attributesOfItem(atPath: target.path)[.size] as? Int64) ?? 0
        return Summary(bytes: bytes, pages: pages, schema: schema)
    }

    /// The schema and page count of a sound backup; throws what is wrong with it otherwise.
    static func check(_ file: URL) throws -> (schema: String, pages: Int) {
        var configuration = Configuration()
        configuration.readonly = true
        let queue: DatabaseQueue
        do {
            queue = try DatabaseQueue(path: file.path, configuration: configuration)
        } catch {
            throw BackupError.unsound(file.path, "\(error)")
        }
        defer { try? queue.close() }
        return try queue.read { db in
            let verdict: [String]
            do {
                verdict = try String.fetchAll(db, sql: "PRAGMA integrity_check")
            } catch {
                throw BackupError.unsound(file.path, "\(error)")
            }
            guard verdict == ["ok"] else {
                throw BackupError.unsound(file.path, verdict.prefix(5).joined(separator: "; "))
            }
            let schema = try Self.schema(of: db, path: file.path)
            let known = Set(SQLiteSchema.migrator.migrations)
            let applied = try SQLiteSchema.migrator.appliedIdentifiers(db)
            let unknown = applied.subtracting(known)
            guard unknown.isEmpty else { throw BackupError.newerSchema(file.path, unknown.sorted()) }
            return (schema, try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0)
        }
    }

    /// The newest migration applied to a Ticks database.
    static func schema(of db: Database, path: String) throws -> String {
        let applied: [String]
        do {
            applied = try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations")
        } catch {
            throw BackupError.notTicks(path)
        }
        guard applied.contains("v1-receipts") else { throw BackupError.notTicks(path) }
        let order = SQLiteSchema.migrator.migrations
        return applied.max { (order.firstIndex(of: $0) ?? .max) < (order.firstIndex(of: $1) ?? .max) } ?? "v1-receipts"
    }

    /// Makes a file's contents (or a folder's entries) durable.
    static func syncFile(_ url: URL) throws {
        let descriptor = open(url.path, O_RDONLY)
        guard descriptor >= 0 else { throw BackupError.io(url.path, String(cString: strerror(errno))) }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw BackupError.io(url.path, String(cString: strerror(errno))) }
    }
}

/// Why a backup or restore was refused.
public enum BackupError: Error, CustomStringConvertible, Equatable {
    case noDatabase(String)
    case noBackup(String)
    case notTicks(String)
    case unsound(String, String)
    case newerSchema(String, [String])
    case databaseExists(String)
    case io(String, String)

    public var description: String {
        switch self {
        case .noDatabase(let path): "there is no database at \(path)"
        case .noBackup(let path): "there is no backup at \(path)"
        case .notTicks(let path): "\(path) is not a Ticks database"
        case .unsound(let path, let why): "\(path) is damaged: \(why)"
        case .newerSchema(let path, let migrations):
            "\(path) comes from a newer Ticks (migrations \(migrations.joined(separator: ", "))): restore it with that version"
        case .databaseExists(let path):
            "\(path) exists: restore into an empty data folder, or add --replace (the old database is kept beside it as ticks.sqlite.before-restore)"
        case .io(let path, let why): "\(path): \(why)"
        }
    }
}
