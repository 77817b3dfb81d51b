import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The one process that may use a SQLite data folder: `ticks serve` holds
/// this while it runs, and `ticks restore` while it replaces the database, so
/// neither replaces a database under a running server nor starts a second
/// server on the same file. An advisory `flock` on `ticks.lock` in the
/// folder: the kernel drops it when the process ends, however it ends
/// (a `kill -9` leaves no stale lock behind).
public final class DataDirectoryLock: Sendable {
    /// The open lock file, closed once by `release` (its owner's call or `deinit`).
    private let descriptor: Int32

    /// Takes the lock of `directory`, or throws `DataDirectoryLock.Held` naming the
    /// process that holds it.
    public init(directory: URL) throws {
        let path = directory.appendingPathComponent("ticks.lock").path
        let created = FileStatus(path, following: false) == nil
        let descriptor = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, PrivateFiles.fileMode)
        guard descriptor >= 0 else { throw BackupError.io(path, String(cString: strerror(errno))) }
        if created {
            // 0600 whatever the umask; and made by root (a restore), the folder owner's, whose server opens it next.
            _ = fchmod(descriptor, PrivateFiles.fileMode)
            try? PrivateFiles.giveOwner(of: directory, to: descriptor, path: path)
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let holder = (try? String(contentsOfFile: path, encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines)
            close(descriptor)
            throw Held(directory: directory.path, process: holder.flatMap(Int32.init))
        }
        // Who holds it, for the message a second process gets.
        let pid = "\(getpid())\n"
        _ = ftruncate(descriptor, 0)
        _ = pid.withCString { pwrite(descriptor, $0, strlen($0), 0) }
        self.descriptor = descriptor
    }

    /// Lets another process have the folder (closing the file drops the lock).
    public func release() {
        // Closing twice could close a descriptor that was opened since under the same number.
        if released.exchange(true, ordering: .acquiringAndReleasing) { return }
        close(descriptor)
    }

    private let released = Atomic(false)

    deinit { release() }

    /// Another process uses the folder.
    public struct Held: Error, CustomStringConvertible, Equatable {
        public var directory: String
        public var process: Int32?

        public var description: String {
            "another Ticks process\(process.map { " (pid \($0))" } ?? "") is using the data folder \(directory): stop it first"
        }
    }
}
