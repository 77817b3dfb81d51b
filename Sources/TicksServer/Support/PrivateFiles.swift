import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Files that hold messages or secrets (the database and its companions, the
/// credentials, backups, the data folder's lock) are readable by their owner
/// only: files 0600 and the data folder 0700, whatever the umask of the
/// process that writes them (docs/operations.md, "Files and permissions").
///
/// And a file is known by its device and inode, never by its name: two
/// spellings of one path, a hard link or a symbolic link all name the same
/// `FileIdentity`.
public enum PrivateFiles {
    /// The mode of every file Ticks writes.
    public static let fileMode: mode_t = 0o600
    /// The mode of a data folder Ticks creates.
    public static let folderMode: mode_t = 0o700

    /// Creates `folder` (and the folders above it that are missing) with mode
    /// 0700, or leaves it as it is when it exists. Whether it was created.
    @discardableResult
    public static func makeFolder(_ folder: URL) throws -> Bool {
        let path = folder.path
        if let status = FileStatus(path, following: true) {
            guard status.kind == .directory else { throw PrivateFileError(path, "exists and is not a folder") }
            return false
        }
        let parent = folder.deletingLastPathComponent()
        if parent.path != path, FileStatus(parent.path, following: true) == nil {
            try makeFolder(parent)
        }
        guard mkdir(path, folderMode) == 0 else {
            if errno == EEXIST, FileStatus(path, following: true)?.kind == .directory { return false }
            throw PrivateFileError(path, errno)
        }
        // mkdir's mode passes through the umask, which can only take bits away;
        // chmod sets it exactly.
        guard chmod(path, folderMode) == 0 else { throw PrivateFileError(path, errno) }
        return true
    }

    /// What is looser than it should be in a data folder: the folder itself
    /// when others may enter it, and each file of `names` in it that others may
    /// read or write. One line each, for a warning at start; empty when all is tight.
    public static func loosePermissions(in folder: URL, names: [String]) -> [String] {
        var found: [String] = []
        if let status = FileStatus(folder.path, following: true), status.mode & 0o077 != 0 {
            found.append(
                "the data folder \(folder.path) has mode \(status.octalMode): others can reach the messages in it (chmod 700 \(folder.path))")
        }
        for name in names {
            let path = folder.appendingPathComponent(name).path
            if let status = FileStatus(path, following: false), status.kind == .regular, status.mode & 0o077 != 0 {
                found.append("\(path) has mode \(status.octalMode): others can read it (chmod 600 \(path))")
            }
        }
        return found
    }

    /// Creates `path` as a new regular file of mode 0600 and returns its open
    /// descriptor (the caller closes it). Fails if anything is at `path`,
    /// a symbolic link included.
    public static func createNew(_ path: String) throws -> Int32 {
        let descriptor = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, fileMode)
        guard descriptor >= 0 else { throw PrivateFileError(path, errno) }
        guard fchmod(descriptor, fileMode) == 0 else {
            let error = PrivateFileError(path, errno)
            close(descriptor)
            throw error
        }
        return descriptor
    }

    /// Writes `data` as the new file `url`, whole or not at all, and 0600 from
    /// its first byte: a file beside it, synced, linked to its name (which
    /// never replaces), the folder synced. False, and nothing written, when
    /// something is at `url` already.
    public static func writeNew(_ data: Data, to url: URL) throws -> Bool {
        let folder = url.deletingLastPathComponent()
        let partial = folder.appendingPathComponent(".\(url.lastPathComponent).\(getpid()).partial").path
        let descriptor = try createNew(partial)
        defer {
            close(descriptor)
            unlink(partial)
        }
        try writeAll(data, to: descriptor, path: partial)
        guard fsync(descriptor) == 0 else { throw PrivateFileError(partial, errno) }
        guard link(partial, url.path) == 0 else {
            if errno == EEXIST { return false }
            throw PrivateFileError(url.path, errno)
        }
        try sync(folder.path)
        return true
    }

    /// Writes all of `data` to the open `descriptor` (of the file at `path`, for the error).
    public static func writeAll(_ data: Data, to descriptor: Int32, path: String) throws {
        try data.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0, errno == EINTR { continue }
                guard written > 0 else { throw PrivateFileError(path, errno) }
                offset += written
            }
        }
    }

    /// Makes a file's contents (or a folder's entries) durable.
    public static func sync(_ path: String) throws {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw PrivateFileError(path, errno) }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw PrivateFileError(path, errno) }
    }

    /// Gives the open file `descriptor` the owner of `folder`, when this process
    /// may (as root): what root writes into a service's data folder stays the
    /// service's to use.
    public static func giveOwner(of folder: URL, to descriptor: Int32, path: String) throws {
        guard geteuid() == 0, let owner = FileStatus(folder.path, following: true) else { return }
        guard fchown(descriptor, owner.owner, owner.group) == 0 else { throw PrivateFileError(path, errno) }
    }
}

/// A file's device and inode: the same file, whatever path names it.
public struct FileIdentity: Hashable, Sendable {
    public var device: UInt64
    public var inode: UInt64
}

/// What `lstat` (or `stat`, `following` symbolic links) says of a path; nil when nothing is there.
public struct FileStatus: Sendable {
    public enum Kind: Sendable { case regular, directory, symbolicLink, other }

    public var identity: FileIdentity
    public var kind: Kind
    /// The permission bits.
    public var mode: mode_t
    public var owner: uid_t
    public var group: gid_t
    public var size: Int64

    public init?(_ path: String, following: Bool) {
        var info = stat()
        guard (following ? stat(path, &info) : lstat(path, &info)) == 0 else { return nil }
        self.init(info)
    }

    /// What `fstat` says of an open file.
    public init?(descriptor: Int32) {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return nil }
        self.init(info)
    }

    private init(_ info: stat) {
        identity = FileIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
        switch info.st_mode & S_IFMT {
        case S_IFREG: kind = .regular
        case S_IFDIR: kind = .directory
        case S_IFLNK: kind = .symbolicLink
        default: kind = .other
        }
        mode = info.st_mode & 0o7777
        owner = info.st_uid
        group = info.st_gid
        size = Int64(info.st_size)
    }

    public var octalMode: String { "0" + String(mode, radix: 8) }
}

/// A file operation that failed, with the system's reason.
public struct PrivateFileError: Error, CustomStringConvertible, Equatable {
    public var path: String
    public var reason: String

    public init(_ path: String, _ reason: String) {
        self.path = path
        self.reason = reason
    }

    init(_ path: String, _ code: Int32) {
        self.init(path, String(cString: strerror(code)))
    }

    public var description: String { "\(path): \(reason)" }
}
