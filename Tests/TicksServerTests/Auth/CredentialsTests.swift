import Foundation
import Testing

@testable import TicksServer

@Suite("Credentials")
struct CredentialsTests {
    @Test("a secret under 32 bytes is refused with a clear message")
    func shortSecret() {
        #expect(throws: CredentialsError.secretTooShort(bytes: 31)) {
            try Credentials(apiKey: "k", apiSecret: String(repeating: "s", count: 31))
        }
        #expect(throws: CredentialsError.emptyKey) { try Credentials(apiKey: "", apiSecret: String(repeating: "s", count: 32)) }
        #expect(CredentialsError.secretTooShort(bytes: 5).description.contains("at least 32 bytes"))
    }

    @Test("generated credentials are kept with mode 0600 and reused")
    func generatedAndReused() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ticks-cred-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let first = try CredentialsFile.loadOrCreate(in: folder)
        #expect(first.created)
        #expect(first.credentials.apiSecret.utf8.count >= 32)
        let attributes = try FileManager.default.attributesOfItem(atPath: CredentialsFile.path(in: folder))
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let second = try CredentialsFile.loadOrCreate(in: folder)
        #expect(!second.created)
        #expect(second.credentials == first.credentials)
        #expect(Credentials.generate().apiSecret != first.credentials.apiSecret)
    }

    @Test("tokens: signed user tokens verify, expiry and forgery do not")
    func tokens() async throws {
        let credentials = try Credentials(apiKey: "k", apiSecret: String(repeating: "s", count: 32))
        let authority = await TokenAuthority(credentials: credentials)
        #expect(try await authority.principal(for: authority.userToken(for: "alice")) == .user("alice"))
        #expect(try await authority.principal(for: authority.serverToken()) == .server)
        let expired = try await authority.userToken(for: "alice", expiresIn: -1)
        await #expect(throws: APIError.tokenExpired("token has expired")) { try await authority.principal(for: expired) }
        let other = await TokenAuthority(credentials: try Credentials(apiKey: "k", apiSecret: String(repeating: "t", count: 32)))
        let forged = try await other.userToken(for: "alice")
        await #expect(throws: APIError.self) { try await authority.principal(for: forged) }
    }
}
