/// Where a server keeps its state: a configuration value, opened by `buildApplication`.
public enum Storage: Sendable, Equatable {
    /// SQLite in a file (created if needed): one node, no set-up.
    case sqlite(path: String)
    /// SQLite in memory: gone when the process ends (tests, trying things out).
    case memory
    /// PostgreSQL, shared by several nodes: `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?schema=NAME]`.
    case postgres(url: String)
}
