import Foundation
import GRDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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
/// Neither command deletes anything but the old backups `--keep` is asked to
/// remove (`prune`), and each writes over or removes only what it can prove
/// is its own: a backup replaces a file only with `--replace` and only a
/// Ticks backup (a Ticks database in rollback-journal mode, which a live
/// database never is), never a folder, and never a file of a data folder's
/// live set, compared by device and inode; `--keep` removes only files named
/// as `--to FOLDER` names its backups that are sound Ticks backups; a restore
/// moves the database it replaces aside under a name of its own. Every file
/// they write is 0600.
public enum SQLiteBackup {
    /// The database file's name in a data folder.
    public static let databaseName = "ticks.sqlite"

    /// The files SQLite keeps beside a database while it is in use.
    static let companionSuffixes = ["-wal", "-shm", "-journal"]

    /// The database file of a data folder.
    public static func databasePath(in directory: URL) -> URL {
        directory.appendingPathComponent(databaseName)
    }

    /// The files of a data folder that make up a running server's state: the
    /// database, its companions, the lock and the credentials. A backup never
    /// writes one of them, and a restore never reads one as its source.
    public static func liveNames() -> [String] {
        [databaseName] + companionSuffixes.map { databaseName + $0 } + ["ticks.lock", "credentials.json"]
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
        /// The file written: the backup, or the restored database.
        public var path: String
        /// What a restore moved aside (the database it replaced, with its companions).
        public var keptAside: [String] = []
    }

    /// Where a backup goes, once `--to` is understood.
    public struct Target: Sendable, Equatable {
        /// The backup file.
        public var file: URL
        /// The backup that is there and will be replaced (proven one); nil when there is none.
        public var replacing: FileIdentity?
    }

    /// Copies the database of `directory` to the file `destination` names while
    /// a server may be writing to it (`target(for:…)` says where, and refuses).
    /// `pagesPerStep` pages are copied at a time, then `progress` is told.
    public static func backup(
        dataDirectory directory: URL, to destination: String, replace: Bool = false, now: Date = Date(),
        pagesPerStep: Int32 = 1_024, progress: @escaping (Progress) -> Void = { _ in }
    ) throws -> Summary {
        let source = databasePath(in: directory)
        guard FileStatus(source.path, following: true)?.kind == .regular else {
            throw BackupError.noDatabase(source.path)
        }
        let target = try Self.target(for: destination, dataDirectory: directory, replace: replace, now: now)
        let folder = target.file.deletingLastPathComponent()
        let partial = folder.appendingPathComponent(".\(target.file.lastPathComponent).partial")
        // The partial file is this backup's while it holds the lock on it: a
        // second backup to the same file is refused, not interleaved.
        let descriptor = open(partial.path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, PrivateFiles.fileMode)
        guard descriptor >= 0 else { throw BackupError.io(partial.path, String(cString: strerror(errno))) }
        defer { close(descriptor) }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else { throw BackupError.busy(target.file.path) }
        guard let status = FileStatus(descriptor: descriptor), status.kind == .regular,
            !liveIdentities(in: directory).contains(status.identity)
        else { throw BackupError.notAFile(partial.path) }
        guard ftruncate(descriptor, 0) == 0, fchmod(descriptor, PrivateFiles.fileMode) == 0 else {
            throw BackupError.io(partial.path, String(cString: strerror(errno)))
        }
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        // Opening does not write: the server's connections already made the file WAL.
        let reader = try DatabasePool(path: source.path, configuration: configuration)
        defer { try? reader.close() }
        let schema = try reader.read { db in try Self.schema(of: db, path: source.path) }
        do {
            let copy = try DatabaseQueue(path: partial.path)
            try reader.backup(to: copy, pagesPerStep: pagesPerStep) { step in
                progress(
                    Progress(
                        copiedPages: step.totalPageCount - step.remainingPageCount, totalPages: step.totalPageCount,
                        isCompleted: step.isCompleted))
            }
            // A file that stands alone: no log beside it to carry along. Also
            // what tells a backup from a live database (always WAL).
            let pages = try copy.writeWithoutTransaction { db -> Int in
                try db.execute(sql: "PRAGMA journal_mode = DELETE")
                return try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            }
            try copy.close()
            guard fsync(descriptor) == 0 else { throw BackupError.io(partial.path, String(cString: strerror(errno))) }
            try Self.putInPlace(partial, as: target)
            try PrivateFiles.sync(folder.path)
            let bytes = FileStatus(target.file.path, following: false)?.size ?? 0
            return Summary(bytes: bytes, pages: pages, schema: schema, path: target.file.path)
        } catch {
            unlink(partial.path)
            throw error
        }
    }

    /// What `prune` did in a folder of backups.
    public struct Pruned: Sendable, Equatable {
        /// The backups kept, newest first: the one just written, then the newest others.
        public var kept: [String] = []
        /// The backups removed, newest first.
        public var removed: [String] = []
        /// Files named as a backup that are not proven ones: neither removed nor counted.
        public var leftAlone: [Note] = []
        /// Backups that could not be removed.
        public var failed: [Note] = []
    }

    /// A file, and why it was left (or why removing it failed).
    public struct Note: Sendable, Equatable {
        public var path: String
        public var why: String
    }

    /// The name `ticks backup --to FOLDER` gives a backup it writes at `now`: `ticks-YYYYMMDD-HHMMSS.sqlite` (UTC).
    public static func backupName(at now: Date) -> String { "ticks-\(stamp(now)).sqlite" }

    /// Whether `name` is exactly one `backupName(at:)` gives: `ticks-`, a time
    /// in UTC that reads back as itself (`YYYYMMDD-HHMMSS`, ASCII digits: what
    /// `stamp` writes), `.sqlite`.
    public static func isBackupName(_ name: String) -> Bool {
        guard name.hasPrefix("ticks-"), name.hasSuffix(".sqlite") else { return false }
        let text = String(name.dropFirst("ticks-".count).dropLast(".sqlite".count))
        guard let date = stampFormatter().date(from: text) else { return false }
        return stamp(date) == text
    }

    /// Removes the oldest backups in `folder` so that `keep` remain (`ticks
    /// backup --keep`). A file is counted, and ever removed, only when it is
    /// provably one `ticks backup` wrote there (`whyNotPruned`): its name is
    /// exactly `isBackupName`, it is a regular file of no data folder's live
    /// set with no journal or log beside it, a Ticks backup (`whyNotABackup`,
    /// the test `--replace` applies) and sound (`check`, the test `ticks
    /// restore` applies). Everything else stays; a file named as a backup that
    /// fails the test is reported in `leftAlone`. The newest go by the time in
    /// their names; `written` (the backup just made) is kept whatever its name
    /// says, so a clock set back never removes the new backup.
    public static func prune(folder: URL, keep: Int, dataDirectory: URL, written: URL? = nil) throws -> Pruned {
        guard keep >= 1 else { throw BackupError.keepTooFew(keep) }
        guard FileStatus(folder.path, following: true)?.kind == .directory else {
            throw BackupError.noFolder(folder.path)
        }
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: folder.path)
        } catch {
            throw BackupError.io(folder.path, "\(error)")
        }
        let live = liveIdentities(in: dataDirectory)
        let spared = written.flatMap { FileStatus($0.path, following: false)?.identity }
        var pruned = Pruned()
        var candidates: [(path: String, identity: FileIdentity)] = []
        for name in names.filter(isBackupName).sorted(by: >) {
            let file = folder.appendingPathComponent(name)
            guard let status = FileStatus(file.path, following: false) else { continue }  // gone meanwhile
            if let why = whyNotPruned(file, status: status, live: live) {
                pruned.leftAlone.append(Note(path: file.path, why: why))
            } else if status.identity == spared {
                pruned.kept.append(file.path)
            } else {
                candidates.append((file.path, status.identity))
            }
        }
        for candidate in candidates {
            guard pruned.kept.count >= keep else {
                pruned.kept.append(candidate.path)
                continue
            }
            // Still the file that was checked (not one put in its place since).
            guard FileStatus(candidate.path, following: false)?.identity == candidate.identity else {
                pruned.leftAlone.append(Note(path: candidate.path, why: "it changed while it was checked"))
                continue
            }
            if unlink(candidate.path) == 0 {
                pruned.removed.append(candidate.path)
            } else if errno != ENOENT {
                pruned.failed.append(Note(path: candidate.path, why: String(cString: strerror(errno))))
            }
        }
        if !pruned.removed.isEmpty { try PrivateFiles.sync(folder.path) }
        return pruned
    }

    /// Why `prune` may not count or remove `file` (`status` is its `lstat`), or nil when it is a sound Ticks backup.
    static func whyNotPruned(_ file: URL, status: FileStatus, live: Set<FileIdentity>) -> String? {
        switch status.kind {
        case .regular: break
        case .symbolicLink: return "it is a symbolic link"
        default: return "it is not a regular file"
        }
        guard !live.contains(status.identity) else { return "it is a file of the live data folder" }
        for suffix in companionSuffixes where FileStatus(file.path + suffix, following: false) != nil {
            return "a \(suffix.dropFirst()) file is beside it (something had it open to write)"
        }
        if let why = whyNotABackup(file) { return "it is not a Ticks backup (\(why))" }
        do {
            _ = try check(file)
        } catch BackupError.unsound(_, let why) {
            return "it is damaged (\(why))"
        } catch BackupError.newerSchema(_, let migrations) {
            return "it comes from a newer Ticks (migrations \(migrations.joined(separator: ", ")))"
        } catch {
            return "it is not a sound Ticks backup (\(error))"
        }
        return nil
    }

    /// The backup file `destination` names, or why it may not be written:
    /// - an empty path and the current folder are refused (a slip of the keys);
    /// - a folder (or a symbolic link to one) gets a new file `ticks-YYYYMMDD-HHMMSS.sqlite` (UTC) in it;
    /// - a file of the data folder's live set, by name or by device and inode, is refused;
    /// - an existing file is replaced only with `replace`, and only if it is a Ticks backup;
    /// - a symbolic link to anything but a folder, or anything but a regular file, is refused.
    public static func target(for destination: String, dataDirectory directory: URL, replace: Bool, now: Date) throws
        -> Target
    {
        guard !destination.isEmpty else { throw BackupError.emptyTarget }
        let url = URL(fileURLWithPath: destination)
        if let here = FileStatus(FileManager.default.currentDirectoryPath, following: true),
            FileStatus(url.path, following: true)?.identity == here.identity
        {
            throw BackupError.currentFolder(destination)
        }
        let live = liveIdentities(in: directory)
        switch FileStatus(url.path, following: false) {
        case nil:
            guard !destination.hasSuffix("/") else { throw BackupError.noFolder(destination) }
            let folder = url.deletingLastPathComponent()
            guard let folderStatus = FileStatus(folder.path, following: true), folderStatus.kind == .directory else {
                throw BackupError.noFolder(folder.path)
            }
            // A name the server would take for its own if it were there (a log not written yet, say).
            if folderStatus.identity == FileStatus(directory.path, following: true)?.identity,
                liveNames().contains(url.lastPathComponent)
            {
                throw BackupError.liveFile(url.path)
            }
            return Target(file: url, replacing: nil)
        case let status?
        where status.kind == .directory
            || status.kind == .symbolicLink && FileStatus(url.path, following: true)?.kind == .directory:
            // A folder, or a symbolic link to one (as systemd makes /var/lib/NAME for a StateDirectory= under
            // DynamicUser=): a new file in it, never written through a link.
            let named = url.appendingPathComponent(backupName(at: now))
            guard FileStatus(named.path, following: false) == nil || replace else {
                throw BackupError.targetExists(named.path)
            }
            return try target(for: named.path, dataDirectory: directory, replace: replace, now: now)
        case let status? where status.kind == .regular:
            guard !live.contains(status.identity) else { throw BackupError.liveFile(url.path) }
            guard replace else { throw BackupError.targetExists(url.path) }
            if let why = whyNotABackup(url) { throw BackupError.notABackup(url.path, why) }
            return Target(file: url, replacing: status.identity)
        case let status?:
            throw status.kind == .symbolicLink ? BackupError.symbolicLink(url.path) : BackupError.notAFile(url.path)
        }
    }

    /// Renames the finished `partial` onto the target: over the backup proven
    /// there (if it is still that file), or where nothing is (refused if
    /// something appeared meanwhile: `link` does not replace).
    static func putInPlace(_ partial: URL, as target: Target) throws {
        let now = FileStatus(target.file.path, following: false)
        if let proven = target.replacing {
            guard now?.identity == proven else { throw BackupError.changedMeanwhile(target.file.path) }
            guard rename(partial.path, target.file.path) == 0 else {
                throw BackupError.io(target.file.path, String(cString: strerror(errno)))
            }
        } else {
            guard now == nil, link(partial.path, target.file.path) == 0 else {
                if now != nil || errno == EEXIST { throw BackupError.changedMeanwhile(target.file.path) }
                throw BackupError.io(target.file.path, String(cString: strerror(errno)))
            }
            unlink(partial.path)
        }
    }

    /// Why `file` is not a backup `ticks backup` made, or nil when it is one:
    /// a SQLite database in rollback-journal mode (a live Ticks database is
    /// always in WAL mode; a backup never is) with Ticks' migrations.
    public static func whyNotABackup(_ file: URL) -> String? {
        guard let handle = FileHandle(forReadingAtPath: file.path) else { return "it cannot be read" }
        let header = (try? handle.read(upToCount: 100)) ?? Data()
        try? handle.close()
        guard header.count == 100, header.prefix(16) == Data("SQLite format 3\0".utf8) else {
            return "it is not a SQLite database"
        }
        guard header[18] == 1, header[19] == 1 else { return "it is in WAL mode, as a live database is" }
        var configuration = Configuration()
        configuration.readonly = true
        do {
            let queue = try DatabaseQueue(path: file.path, configuration: configuration)
            defer { try? queue.close() }
            _ = try queue.read { db in try Self.schema(of: db, path: file.path) }
            return nil
        } catch {
            return "it is not a Ticks database"
        }
    }

    /// Puts the backup `file` in place as the database of `directory`. Refused
    /// while a server holds the folder, for a file that is not a sound Ticks
    /// database of a schema this binary knows, for a file of the folder's own
    /// live set, and over an existing database unless `replace`; then the old
    /// one, with its companions, is moved aside as
    /// `ticks.sqlite.before-restore-YYYYMMDD-HHMMSS` (UTC), never over an
    /// earlier one. The restored database is 0600 and, when root restores,
    /// belongs to the data folder's owner.
    public static func restore(from file: URL, dataDirectory directory: URL, replace: Bool, now: Date = Date()) throws
        -> Summary
    {
        guard let source = FileStatus(file.path, following: true) else { throw BackupError.noBackup(file.path) }
        guard source.kind == .regular else { throw BackupError.notAFile(file.path) }
        try PrivateFiles.makeFolder(directory)
        let lock = try DataDirectoryLock(directory: directory)
        defer { lock.release() }
        guard !liveIdentities(in: directory).contains(source.identity) else {
            throw BackupError.sourceIsTarget(file.path)
        }
        // A database with its log beside it is some server's live state: the file alone is not all of it.
        if let log = FileStatus(file.path + "-wal", following: true), log.size > 0 {
            throw BackupError.liveSource(file.path)
        }
        let (schema, pages) = try Self.check(file)
        let target = databasePath(in: directory)
        let companions = [""] + companionSuffixes
        let present = companions.filter { FileStatus(target.path + $0, following: false) != nil }
        var keptAside: [String] = []
        if !present.isEmpty {
            // A log or shared memory left without its database would be applied to the restored one: aside too.
            guard replace || !present.contains("") else { throw BackupError.databaseExists(target.path) }
            let aside = try asideName(for: target, now: now)
            for suffix in present {
                guard rename(target.path + suffix, aside.path + suffix) == 0 else {
                    throw BackupError.io(target.path + suffix, String(cString: strerror(errno)))
                }
                keptAside.append(aside.path + suffix)
            }
        }
        let partial = directory.appendingPathComponent(".ticks.sqlite.restoring")
        // Under the folder's lock no other restore writes it: one left by a restore that died is ours.
        unlink(partial.path)
        let descriptor = try PrivateFiles.createNew(partial.path)
        defer { close(descriptor) }
        do {
            try copy(file, to: descriptor, path: partial.path)
            try PrivateFiles.giveOwner(of: directory, to: descriptor, path: partial.path)
            guard fsync(descriptor) == 0 else { throw BackupError.io(partial.path, String(cString: strerror(errno))) }
            guard rename(partial.path, target.path) == 0 else {
                throw BackupError.io(target.path, String(cString: strerror(errno)))
            }
        } catch {
            unlink(partial.path)
            throw error
        }
        try PrivateFiles.sync(directory.path)
        let bytes = FileStatus(target.path, following: false)?.size ?? 0
        return Summary(bytes: bytes, pages: pages, schema: schema, path: target.path, keptAside: keptAside)
    }

    /// A name for the replaced database no file has yet (with any companion suffix).
    static func asideName(for target: URL, now: Date) throws -> URL {
        let base = target.path + ".before-restore-" + stamp(now)
        for attempt in 1...100 {
            let candidate = attempt == 1 ? base : "\(base)-\(attempt)"
            if ([""] + companionSuffixes).allSatisfy({ FileStatus(candidate + $0, following: false) == nil }) {
                return URL(fileURLWithPath: candidate)
            }
        }
        throw BackupError.io(base, "a hundred databases were kept aside in this second already")
    }

    /// Copies the bytes of `file` into the open `descriptor`.
    static func copy(_ file: URL, to descriptor: Int32, path: String) throws {
        guard let input = FileHandle(forReadingAtPath: file.path) else { throw BackupError.noBackup(file.path) }
        defer { try? input.close() }
        while let chunk = try input.read(upToCount: 1 << 20), !chunk.isEmpty {
            try PrivateFiles.writeAll(chunk, to: descriptor, path: path)
        }
    }

    /// The identities of the live set of `directory` that exist now (and of the folder's lock and credentials).
    static func liveIdentities(in directory: URL) -> Set<FileIdentity> {
        Set(liveNames().compactMap { FileStatus(directory.appendingPathComponent($0).path, following: true)?.identity })
    }

    /// `YYYYMMDD-HHMMSS` in UTC.
    static func stamp(_ date: Date) -> String { stampFormatter().string(from: date) }

    static func stampFormatter() -> DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd-HHmmss"
        return formatter
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
            let unknown = try SQLiteSchema.unknownMigrations(in: db)
            guard unknown.isEmpty else { throw BackupError.newerSchema(file.path, unknown) }
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

}

/// Why a backup or restore was refused.
public enum BackupError: Error, CustomStringConvertible, Equatable {
    case noDatabase(String)
    case noBackup(String)
    case notTicks(String)
    case unsound(String, String)
    case newerSchema(String, [String])
    case databaseExists(String)
    case emptyTarget
    case currentFolder(String)
    case noFolder(String)
    case liveFile(String)
    case targetExists(String)
    case notABackup(String, String)
    case symbolicLink(String)
    case notAFile(String)
    case busy(String)
    case changedMeanwhile(String)
    case sourceIsTarget(String)
    case liveSource(String)
    case keepTooFew(Int)
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
            "\(path) exists: restore into an empty data folder, or add --replace (the old database is moved aside as ticks.sqlite.before-restore-TIME)"
        case .emptyTarget: "--to is empty: name the backup file, or a folder to write it in"
        case .currentFolder(let path):
            "--to \(path) names the current folder: name the backup file, or another folder to write it in"
        case .noFolder(let path): "there is no folder \(path) to write the backup in"
        case .liveFile(let path):
            "\(path) is a file of the live data folder (its database, log, lock or credentials): a backup never writes there"
        case .targetExists(let path):
            "\(path) exists: name a new file, or add --replace to replace it (only a Ticks backup is replaced)"
        case .notABackup(let path, let why): "\(path) is not a Ticks backup (\(why)): it is not replaced"
        case .symbolicLink(let path): "\(path) is a symbolic link: name the file itself"
        case .notAFile(let path): "\(path) is not a regular file"
        case .busy(let path): "another backup is writing \(path)"
        case .changedMeanwhile(let path):
            "\(path) changed while the backup was written: nothing was replaced; run it again"
        case .sourceIsTarget(let path):
            "\(path) is the data folder's own database: restore from a backup of it (ticks backup)"
        case .liveSource(let path):
            "\(path) has a write-ahead log beside it, as a live database has: make a backup of it with ticks backup and restore that"
        case .keepTooFew(let count): "--keep \(count): keep at least 1 (the backup just written)"
        case .io(let path, let why): "\(path): \(why)"
        }
    }
}
