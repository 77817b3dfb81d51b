/// What this build of Ticks is: `ticks --version`, `GET /admin/status`.
public enum BuildInfo {
    /// The release version (semantic versioning); raised by hand before a release.
    public static let version = "0.9.0"
    /// The git commit the binary was built from, when the build recorded one.
    public static let commit = "unknown"
}
