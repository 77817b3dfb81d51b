import ArgumentParser
import Foundation
import TicksServer

/// `ticks backup`: a consistent copy of a running server's SQLite database.
struct Backup: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy the SQLite database of a data folder, while its server runs (docs/operations.md).")

    @Option(name: .customLong("data-dir"), help: "The server's data folder.") var dataDirectory: String = ".ticks"
    @Option(
        name: .customLong("to"),
        help: ArgumentHelp(
            "The backup file to write, or a folder to write ticks-YYYYMMDD-HHMMSS.sqlite (UTC) in.",
            valueName: "FILE|FOLDER"))
    var destination: String
    @Flag(help: "Replace the file --to names if it exists and is a Ticks backup (nothing else is ever replaced).")
    var replace = false
    @Option(
        help: ArgumentHelp(
            "With --to FOLDER: after the backup, remove the oldest backups in the folder so that N remain. Only files "
                + "named ticks-YYYYMMDD-HHMMSS.sqlite that are sound Ticks backups count and are removed; nothing "
                + "else in the folder is touched.",
            valueName: "N"))
    var keep: Int?
    @Option(help: "Database pages copied per step (4 KiB each); the copy is consistent whatever the steps.")
    var pagesPerStep: Int32 = 1_024
    @Flag(help: "No progress, only the summary.") var quiet = false

    func validate() throws {
        guard pagesPerStep > 0 else { throw ValidationError("--pages-per-step must be positive") }
        if let keep {
            guard keep >= 1 else { throw ValidationError("--keep must be at least 1 (the backup just written)") }
            guard FileStatus(destination, following: true)?.kind == .directory else {
                throw ValidationError(
                    "--keep needs --to to name a folder (it removes the oldest backups in it): \(destination) is not one"
                )
            }
        }
    }

    func run() throws {
        let started = ContinuousClock.now
        let terminal = !quiet && isatty(STDERR_FILENO) == 1
        var shown = -1
        var steps = 0
        let summary = try SQLiteBackup.backup(
            dataDirectory: URL(fileURLWithPath: dataDirectory, isDirectory: true),
            to: destination, replace: replace, pagesPerStep: pagesPerStep
        ) { progress in
            steps += 1
            let percent = Int(progress.fraction * 100)
            guard terminal, percent != shown else { return }
            shown = percent
            FileHandle.standardError.write(
                Data("\rbacking up: \(percent)% (\(progress.copiedPages) of \(progress.totalPages) pages)".utf8))
        }
        if terminal { FileHandle.standardError.write(Data("\n".utf8)) }
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        print(
            "backed up \(summary.bytes) bytes (schema \(summary.schema)) to \(summary.path) in \(steps) steps, "
                + String(format: "%.2f s", seconds))
        guard let keep else { return }
        let folder = URL(fileURLWithPath: destination, isDirectory: true)
        let pruned = try SQLiteBackup.prune(
            folder: folder, keep: keep, dataDirectory: URL(fileURLWithPath: dataDirectory, isDirectory: true),
            written: URL(fileURLWithPath: summary.path))
        for path in pruned.removed { print("removed \(path) (older than the \(keep) newest backups)") }
        for note in pruned.leftAlone {
            FileHandle.standardError.write(
                Data("warning: left \(note.path) alone, not counted: \(note.why)\n".utf8))
        }
        print("\(pruned.kept.count) of at most \(keep) backups kept in \(folder.path)")
        guard pruned.failed.isEmpty else {
            for note in pruned.failed {
                FileHandle.standardError.write(Data("error: could not remove \(note.path): \(note.why)\n".utf8))
            }
            throw ExitCode.failure
        }
    }
}

/// `ticks restore`: puts a backup in place as a data folder's database.
struct Restore: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Put a backup in place as the database of a data folder whose server is stopped.")

    @Option(name: .customLong("from"), help: "The backup file (made by ticks backup).") var source: String
    @Option(name: .customLong("data-dir"), help: "The data folder to restore into.") var dataDirectory: String =
        ".ticks"
    @Flag(help: "Replace a database that is there (moved aside as ticks.sqlite.before-restore-YYYYMMDD-HHMMSS, UTC).")
    var replace = false

    func run() throws {
        let summary = try SQLiteBackup.restore(
            from: URL(fileURLWithPath: source), dataDirectory: URL(fileURLWithPath: dataDirectory, isDirectory: true),
            replace: replace)
        for kept in summary.keptAside { print("moved aside \(kept)") }
        print(
            """
            restored \(summary.bytes) bytes (schema \(summary.schema)) into \(summary.path)
            start the server with the same API key and secret as the backed-up one (its tokens are signed with them)
            """)
    }
}
