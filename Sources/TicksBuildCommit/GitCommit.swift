/// The git commit this build was made from, recorded at build time by the RecordGitCommit plugin
/// (Plugins/RecordGitCommit), which generates `generatedGitCommit`.
///
/// A module of its own, and a function rather than a constant, so that a new commit recompiles
/// only this module and TicksServer, which reads it through `BuildInfo.commit`, is left alone.
public enum GitCommit {
    /// The short commit id (`git rev-parse --short HEAD`), or "unknown" outside a git checkout.
    public static func short() -> String { generatedGitCommit }
}
