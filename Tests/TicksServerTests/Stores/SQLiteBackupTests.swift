import Foundation
import GRDB
import Testing

@testable import TicksServer

#if canImport(Glibc)
import Glibc
#endif

/// `ticks backup --to FOLDER --keep N` (`SQLiteBackup.prune`): after a backup,
/// the oldest of its own backups go so that N remain, and nothing it cannot
/// prove is one of them is removed or counted (tests/python/test_backup_safety.py
/// runs the same with the binary).
@Suite("SQLite backups: --keep")
struct SQLiteBackupKeepTests {
    /// 2026-11-26 03:00:00 UTC.
    static let start = Date(timeIntervalSince1970: 1_795_662_000)

    /// A data folder with a Ticks database and an empty folder for backups, removed after `body`.
    func withFolders(_ body: (_ data: URL, _ backups: URL) throws -> Void) throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("ticks-keep-\(UUID().uuidString)")
        let data = base.appendingPathComponent("data")
        let backups = base.appendingPathComponent("backups")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: backups, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: base) }
        // Migrated, then closed (the engine goes with the scope).
        do { _ = try SQLiteEngine.open(path: SQLiteBackup.databasePath(in: data).path) }
        try body(data, backups)
    }

    /// A backup into `folder` as made `day` days after `start`: its path.
    @discardableResult
    func backup(_ data: URL, into folder: URL, day: Double) throws -> String {
        try SQLiteBackup.backup(dataDirectory: data, to: folder.path, now: Self.start.addingTimeInterval(day * 86_400))
            .path
    }

    /// Every entry of `folder` with its bytes (a folder's as empty, a link's as its target).
    func contents(of folder: URL) throws -> [String: Data] {
        var found: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) {
            let path = folder.appendingPathComponent(name).path
            switch FileStatus(path, following: false)?.kind {
            case .regular: found[name] = try Data(contentsOf: URL(fileURLWithPath: path))
            case .symbolicLink: found[name] = Data(try FileManager.default.destinationOfSymbolicLink(atPath: path).utf8)
            default: found[name] = Data()
            }
        }
        return found
    }

    func name(_ path: String) -> String { URL(fileURLWithPath: path).lastPathComponent }

    @Test("the name is exactly the one a backup into a folder gets, a time that reads back as itself")
    func names() {
        let written = SQLiteBackup.backupName(at: Self.start)
        #expect(written == "ticks-20261126-030000.sqlite")
        #expect(SQLiteBackup.isBackupName(written))
        #expect(SQLiteBackup.isBackupName("ticks-20240229-235959.sqlite"))
        for lookAlike in [
            "ticks-20261126-030000.sqlite.bak", "ticks-20261126-030000.sqlite-journal", "ticks-20261126-0300.sqlite",
            "ticks-20261126-0300000.sqlite", "ticks-20261126_030000.sqlite", "Ticks-20261126-030000.sqlite",
            "ticks-20261126-030000.SQLITE", " ticks-20261126-030000.sqlite", "ticks-20261126-030000.sqlite ",
            ".ticks-20261126-030000.sqlite.partial", "xticks-20261126-030000.sqlite", "ticks-2026112a-030000.sqlite",
            "ticks-20261326-030000.sqlite", "ticks-20261132-030000.sqlite", "ticks-20230229-030000.sqlite",
            "ticks-20261126-246000.sqlite", "ticks-２０２６１１２６-030000.sqlite", "ticks-+2026112-030000.sqlite",
            "ticks.sqlite", "ticks-.sqlite",
        ] {
            #expect(!SQLiteBackup.isBackupName(lookAlike), "\(lookAlike)")
        }
    }

    @Test("the newest N of its own backups stay, the rest go, oldest first, and the new one is 0600")
    func keepsTheNewest() throws {
        try withFolders { data, backups in
            let made = try (0..<5).map { try backup(data, into: backups, day: Double($0)) }
            let pruned = try SQLiteBackup.prune(
                folder: backups, keep: 3, dataDirectory: data, written: URL(fileURLWithPath: made[4]))
            #expect(pruned.kept == [made[4], made[3], made[2]])
            #expect(pruned.removed == [made[1], made[0]])
            #expect(pruned.leftAlone.isEmpty && pruned.failed.isEmpty)
            #expect(Set(try contents(of: backups).keys) == Set(made[2...].map(name)))
            for path in made[2...] { #expect(FileStatus(path, following: false)?.mode == 0o600) }
            // As many as asked for, or fewer: nothing to remove.
            for keep in [3, 4, 10] {
                let again = try SQLiteBackup.prune(folder: backups, keep: keep, dataDirectory: data)
                #expect(again.removed.isEmpty && again.kept == [made[4], made[3], made[2]], "--keep \(keep)")
            }
            let one = try SQLiteBackup.prune(folder: backups, keep: 1, dataDirectory: data)
            #expect(one.kept == [made[4]] && one.removed == [made[3], made[2]])
            #expect(Array(try contents(of: backups).keys) == [name(made[4])])
        }
    }

    @Test("the backup just written stays whatever its name says (a clock set back)")
    func keepsTheOneJustWritten() throws {
        try withFolders { data, backups in
            let later = try [10, 11].map { try backup(data, into: backups, day: Double($0)) }
            let written = try backup(data, into: backups, day: 0)
            let pruned = try SQLiteBackup.prune(
                folder: backups, keep: 2, dataDirectory: data, written: URL(fileURLWithPath: written))
            #expect(pruned.kept == [written, later[1]])
            #expect(pruned.removed == [later[0]])
        }
    }

    /// What a folder of backups may hold besides them: every one stays, and none
    /// counts. The pattern-named ones that are not backups are dated both
    /// before the real backups (they would be the first to go) and after
    /// them (counted, they would push a real backup out).
    @Test("a foreign file, a look-alike name, a damaged or foreign database are neither removed nor counted")
    func removesOnlyItsOwn() throws {
        try withFolders { data, backups in
            let fm = FileManager.default
            let aBackup = try backup(data, into: data.deletingLastPathComponent(), day: -1000)
            func put(_ name: String, _ bytes: Data) throws {
                try bytes.write(to: backups.appendingPathComponent(name))
            }
            func copyBackup(as name: String) throws {
                try fm.copyItem(atPath: aBackup, toPath: backups.appendingPathComponent(name).path)
            }
            // Names it never writes, with a real backup in them: not its own.
            for lookAlike in [
                "ticks-20200101-000000.sqlite.bak", "ticks-20200101-0000.sqlite", "Ticks-20200101-000000.sqlite",
                "ticks-20201301-000000.sqlite", "nightly.sqlite", ".ticks-20200101-000000.sqlite.partial",
            ] {
                try copyBackup(as: lookAlike)
            }
            try put("notes.txt", Data("keep me".utf8))
            // Its names, not its backups.
            let notBackups = [
                "ticks-20200101-000001.sqlite": "it is not a Ticks backup (it is not a SQLite database)",
                "ticks-20300101-000001.sqlite": "it is not a Ticks backup (it is not a SQLite database)",
                "ticks-20200101-000002.sqlite": "it is not a Ticks backup (it is not a Ticks database)",
                "ticks-20300101-000002.sqlite": "it is not a Ticks backup (it is in WAL mode, as a live database is)",
                "ticks-20200101-000003.sqlite": "it is a symbolic link",
                "ticks-20300101-000003.sqlite": "it is not a regular file",
                "ticks-20200101-000004.sqlite": "a journal file is beside it (something had it open to write)",
                "ticks-20300101-000005.sqlite": "it comes from a newer Ticks (migrations v999-from-the-future)",
                "ticks-20200101-000006.sqlite": "it is a file of the live data folder",
            ]
            try put("ticks-20200101-000001.sqlite", Data("years of work".utf8))
            try put("ticks-20300101-000001.sqlite", Data(repeating: 0, count: 8192))
            try DatabaseQueue(path: backups.appendingPathComponent("ticks-20200101-000002.sqlite").path).write { db in
                try db.execute(sql: "CREATE TABLE notes (text TEXT); INSERT INTO notes VALUES ('mine')")
            }
            // A copy of the live database: a Ticks database, in WAL mode.
            try fm.copyItem(
                atPath: SQLiteBackup.databasePath(in: data).path,
                toPath: backups.appendingPathComponent("ticks-20300101-000002.sqlite").path)
            try fm.createSymbolicLink(
                atPath: backups.appendingPathComponent("ticks-20200101-000003.sqlite").path,
                withDestinationPath: aBackup)
            try fm.createDirectory(
                at: backups.appendingPathComponent("ticks-20300101-000003.sqlite"), withIntermediateDirectories: false)
            try copyBackup(as: "ticks-20200101-000004.sqlite")
            try put("ticks-20200101-000004.sqlite-journal", Data())
            try copyBackup(as: "ticks-20300101-000005.sqlite")
            try DatabaseQueue(path: backups.appendingPathComponent("ticks-20300101-000005.sqlite").path).write { db in
                try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v999-from-the-future')")
            }
            // The live database itself, by another name (a hard link).
            #expect(
                link(
                    SQLiteBackup.databasePath(in: data).path,
                    backups.appendingPathComponent("ticks-20200101-000006.sqlite").path) == 0)
            let damaged = "ticks-20200101-000007.sqlite"
            try copyBackup(as: damaged)
            try damage(backups.appendingPathComponent(damaged))
            let before = try contents(of: backups)

            let made = try (0..<3).map { try backup(data, into: backups, day: Double($0)) }
            let pruned = try SQLiteBackup.prune(
                folder: backups, keep: 2, dataDirectory: data, written: URL(fileURLWithPath: made[2]))
            #expect(pruned.kept == [made[2], made[1]])
            #expect(pruned.removed == [made[0]])
            #expect(pruned.failed.isEmpty)
            let left = Dictionary(uniqueKeysWithValues: pruned.leftAlone.map { (name($0.path), $0.why) })
            #expect(Set(left.keys) == Set(notBackups.keys).union([damaged]))
            for (file, why) in notBackups { #expect(left[file] == why, "\(file)") }
            #expect(left[damaged]?.hasPrefix("it is") == true, "\(left[damaged] ?? "")")
            let after = try contents(of: backups)
            for (file, bytes) in before { #expect(after[file] == bytes, "\(file) changed or went") }
            #expect(Set(after.keys) == Set(before.keys).union(made[1...].map(name)))
        }
    }

    /// Overwrites the middle of a database with garbage: its header still says SQLite, its pages do not.
    func damage(_ file: URL) throws {
        let handle = try FileHandle(forWritingTo: file)
        defer { try? handle.close() }
        let size = try handle.seekToEnd()
        try handle.seek(toOffset: 4096)
        try handle.write(contentsOf: Data(repeating: 0xA5, count: Int(size) - 4096))
    }

    @Test("--keep 0, and a folder that is not there, are refused")
    func refusals() throws {
        try withFolders { data, backups in
            try backup(data, into: backups, day: 0)
            #expect(throws: BackupError.keepTooFew(0)) {
                try SQLiteBackup.prune(folder: backups, keep: 0, dataDirectory: data)
            }
            let missing = backups.appendingPathComponent("missing")
            #expect(throws: BackupError.noFolder(missing.path)) {
                try SQLiteBackup.prune(folder: missing, keep: 1, dataDirectory: data)
            }
            #expect(try contents(of: backups).count == 1)
        }
    }

    @Test("a symbolic link to a folder is the folder (systemd's /var/lib/NAME); a link to a file is still refused")
    func linkedFolder() throws {
        try withFolders { data, backups in
            let linked = backups.deletingLastPathComponent().appendingPathComponent("linked")
            try FileManager.default.createSymbolicLink(at: linked, withDestinationURL: backups)
            let path = try backup(data, into: linked, day: 0)
            #expect(path == linked.appendingPathComponent(SQLiteBackup.backupName(at: Self.start)).path)
            #expect(Array(try contents(of: backups).keys) == [SQLiteBackup.backupName(at: Self.start)])
            #expect(try SQLiteBackup.prune(folder: linked, keep: 1, dataDirectory: data).kept == [path])
            let fileLink = backups.appendingPathComponent("link.sqlite")
            try FileManager.default.createSymbolicLink(atPath: fileLink.path, withDestinationPath: path)
            #expect(throws: BackupError.symbolicLink(fileLink.path)) {
                try SQLiteBackup.backup(dataDirectory: data, to: fileLink.path, replace: true)
            }
        }
    }
}
