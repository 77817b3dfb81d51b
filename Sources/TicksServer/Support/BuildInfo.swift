import TicksBuildCommit

/// What this build of Ticks is: `ticks --version`, `GET /admin/status`.
public enum BuildInfo {
    /// The release version (semantic versioning); raised by hand before a release.
    public static let version = "0.10.0-dev"
    /// The git commit the binary was built from (recorded by the build), or "unknown" when it was
    /// built outside a git checkout.
    public static let commit = GitCommit.short()
}
