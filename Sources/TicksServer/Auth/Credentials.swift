import Foundation

/// The app's API key and secret.
public struct Credentials: Sendable, Equatable {
    public var apiKey: String
    public var apiSecret: String

    /// HS256 secrets shorter than this are refused (docs/concepts.md, "The app").
    public static let minimumSecretBytes = 32

    public init(apiKey: String, apiSecret: String) throws {
        guard !apiKey.isEmpty else { throw CredentialsError.emptyKey }
        guard apiSecret.utf8.count >= Self.minimumSecretBytes else {
            throw CredentialsError.secretTooShort(bytes: apiSecret.utf8.count)
        }
        self.apiKey = apiKey
        self.apiSecret = apiSecret
    }

    /// A new key and a random secret of 48 characters drawn from 64 symbols (288 bits).
    public static func generate() -> Credentials {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
        var generator = SystemRandomNumberGenerator()
        func random(_ count: Int) -> String {
            String((0..<count).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] })
        }
        let key = String(random(16).lowercased().filter { $0.isLetter || $0.isNumber }.prefix(12))
        // 48 symbols are 48 bytes: over the 32-byte minimum, so no check is needed.
        return Credentials(unchecked: "ticks" + key, secret: random(48))
    }

    private init(unchecked key: String, secret: String) {
        self.apiKey = key
        self.apiSecret = secret
    }
}

public enum CredentialsError: Error, CustomStringConvertible, Equatable {
    case emptyKey
    case secretTooShort(bytes: Int)
    case unreadableFile(String)

    public var description: String {
        switch self {
        case .emptyKey: "the API key must not be empty"
        case .secretTooShort(let bytes):
            "the API secret is \(bytes) bytes long; HS256 tokens need a secret of at least \(Credentials.minimumSecretBytes) bytes"
        case .unreadableFile(let path): "cannot read the credentials file \(path): expected JSON {api_key, api_secret}"
        }
    }
}

/// Keeps generated credentials in the data folder (mode 0600) so later starts reuse them.
public enum CredentialsFile {
    public static let name = "credentials.json"

    struct Contents: Codable {
        var api_key: String
        var api_secret: String
    }

    /// Reads the file in `dataDirectory`, or generates credentials and writes
    /// it (0600, whole or not at all; two processes starting at once agree on
    /// the first one written).
    public static func loadOrCreate(in dataDirectory: URL) throws -> (credentials: Credentials, created: Bool) {
        let url = dataDirectory.appendingPathComponent(name)
        if FileManager.default.fileExists(atPath: url.path) { return (try read(url), false) }
        let credentials = Credentials.generate()
        let data = try JSONEncoder().encode(Contents(api_key: credentials.apiKey, api_secret: credentials.apiSecret))
        guard try PrivateFiles.writeNew(data, to: url) else { return (try read(url), false) }
        return (credentials, true)
    }

    /// Reads the file in `dataDirectory`; nil when there is none (nothing is made).
    public static func load(from dataDirectory: URL) throws -> Credentials? {
        let url = dataDirectory.appendingPathComponent(name)
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        return try read(url)
    }

    private static func read(_ url: URL) throws -> Credentials {
        guard let data = try? Data(contentsOf: url), let contents = try? JSONDecoder().decode(Contents.self, from: data)
        else { throw CredentialsError.unreadableFile(url.path) }
        return try Credentials(apiKey: contents.api_key, apiSecret: contents.api_secret)
    }

    public static func path(in dataDirectory: URL) -> String {
        dataDirectory.appendingPathComponent(name).path
    }
}
