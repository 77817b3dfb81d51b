import Foundation
import PackagePlugin

/// Writes `GitCommit.generated.swift` into TicksBuildCommit: the short commit of the checkout the
/// package is built from, or "unknown" outside a git checkout (a source tarball, say).
///
/// Why a build command with the git HEAD files as inputs, and not the alternatives:
/// - a `prebuildCommand` would run on every build, but SwiftPM reuses the plugin's commands until
///   the package graph is reloaded (swiftlang/swift-package-manager#5476), so a commit made after
///   the last reload was not seen (tried here with Swift 6.3.1);
/// - `Context.gitInformation` in Package.swift is cached with the manifest, stale the same way;
/// - a file that `scripts/release` writes before building leaves `swift build` without it, and a
///   stale one behind if the script stops half way.
/// A build command reruns when one of its inputs changes. `HEAD` changes when the branch does and
/// `logs/HEAD` (the reflog) grows at every commit, checkout, reset or rebase, so the command runs
/// only when HEAD has moved, and it rewrites the file only when the text differs. The generated
/// constant sits in a module of its own behind a function, so a new commit recompiles that one
/// file and relinks; TicksServer (a whole-module compile in release) is not recompiled.
@main
struct RecordGitCommit: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let package = context.package.directoryURL
        let output = context.pluginWorkDirectoryURL.appending(path: "GitCommit.generated.swift")
        let inputs = Self.gitDirectory(of: package).map { git in
            [git.appending(path: "HEAD"), git.appending(path: "logs/HEAD")]
                .filter { FileManager.default.fileExists(atPath: $0.path) }
        }
        // `[ -e .git ]`: a source tree unpacked inside some other repository must not take its commit.
        let script = """
            commit=unknown
            if [ -e "$1/.git" ]; then
                commit=$(git -C "$1" rev-parse --short HEAD 2>/dev/null) || commit=unknown
            fi
            text="let generatedGitCommit = \\"$commit\\""
            [ "$(cat "$2" 2>/dev/null)" = "$text" ] || printf '%s\\n' "$text" > "$2"
            """
        return [
            .buildCommand(
                displayName: "Recording the git commit",
                executable: URL(fileURLWithPath: "/bin/sh"),
                arguments: ["-c", script, "record-git-commit", package.path, output.path],
                inputFiles: inputs ?? [],
                outputFiles: [output])
        ]
    }

    /// `.git` is a folder in a clone and a file naming the folder (`gitdir: …`) in a worktree.
    static func gitDirectory(of package: URL) -> URL? {
        let dotGit = package.appending(path: ".git")
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: dotGit.path, isDirectory: &isDirectory) else { return nil }
        if isDirectory.boolValue { return dotGit }
        guard let text = try? String(contentsOf: dotGit, encoding: .utf8), text.hasPrefix("gitdir:") else {
            return nil
        }
        let path = text.dropFirst("gitdir:".count).trimmingCharacters(in: .whitespacesAndNewlines)
        return URL(fileURLWithPath: path, relativeTo: package).standardizedFileURL
    }
}
