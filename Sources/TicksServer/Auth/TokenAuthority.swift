import Foundation
import JWTKit
import Synchronization
import TicksProtocol

/// Who is making a request.
public enum Principal: Sendable, Equatable {
    /// A server token: may act for any user named in the request.
    case server
    /// A user token: acts only as this user.
    case user(String)
}

/// The claims of Stream's tokens.
struct TicksClaims: JWTPayload, Equatable {
    var server: Bool?
    var userID: String?
    var exp: ExpirationClaim?

    enum CodingKeys: String, CodingKey {
        case server
        case userID = "user_id"
        case exp
    }

    func verify(using algorithm: some JWTAlgorithm) async throws {
        try exp?.verifyNotExpired()
    }
}

/// Signs and checks HS256 tokens with the app secret.
public struct TokenAuthority: Sendable {
    public let credentials: Credentials
    private let keys: JWTKeyCollection
    /// Tokens whose signature checked out, with their expiry: clients send the
    /// same token on every call, and the check is most of a small request's cost.
    private let verified: VerifiedTokens

    /// - Parameter cacheBytes: what the verified tokens may hold.
    public init(credentials: Credentials, cacheBytes: Int = 16 << 20) async {
        self.credentials = credentials
        self.verified = VerifiedTokens(maxEntries: 100_000, maxBytes: cacheBytes)
        self.keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: credentials.apiSecret), digestAlgorithm: .sha256)
    }

    /// Checks the token's signature, expiry and shape.
    public func principal(for token: String) async throws(APIError) -> Principal {
        if let known = verified.principal(for: token, at: Date()) { return known }
        let claims: TicksClaims
        do {
            claims = try await keys.verify(token, as: TicksClaims.self)
        } catch let error as JWTError where error.errorType == .claimVerificationFailure {
            throw .unauthorized("token has expired")
        } catch {
            throw .unauthorized("token signature is invalid")
        }
        let principal: Principal
        if claims.server == true {
            principal = .server
        } else if let userID = claims.userID, Identifier.isValid(userID) {
            principal = .user(userID)
        } else {
            throw .unauthorized("token has neither \"server\": true nor a valid user_id")
        }
        verified.remember(token, principal, expires: claims.exp?.value)
        return principal
    }

    /// A user token, optionally expiring.
    public func userToken(for userID: String, expiresIn: TimeInterval? = nil) async throws -> String {
        try await keys.sign(
            TicksClaims(server: nil, userID: userID, exp: expiresIn.map { ExpirationClaim(value: Date() + $0) }))
    }

    /// A server token.
    public func serverToken() async throws -> String {
        try await keys.sign(TicksClaims(server: true, userID: nil, exp: nil))
    }
}

/// Verified tokens and what they grant, until they expire; bounded in entries
/// and bytes (`BoundedCache`): forgotten tokens are simply verified again.
final class VerifiedTokens: Sendable {
    struct Entry {
        let principal: Principal
        let expires: Date?
    }
    let entries: BoundedCache<String, Entry>

    init(maxEntries: Int, maxBytes: Int) {
        entries = BoundedCache(maxEntries: maxEntries, maxBytes: maxBytes)
    }

    /// The principal of a token verified before and not expired at `now`.
    func principal(for token: String, at now: Date) -> Principal? {
        guard let entry = entries.value(for: token) else { return nil }
        if let expires = entry.expires, expires <= now {
            entries.removeValue(for: token)
            return nil
        }
        return entry.principal
    }

    func remember(_ token: String, _ principal: Principal, expires: Date?) {
        let userBytes = if case .user(let id) = principal { id.utf8.count } else { 0 }
        entries.insert(Entry(principal: principal, expires: expires), for: token, cost: token.utf8.count + userBytes + 96)
    }
}
