import Foundation
import JWTKit

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

    public init(credentials: Credentials) async {
        self.credentials = credentials
        self.keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: credentials.apiSecret), digestAlgorithm: .sha256)
    }

    /// Checks the token's signature, expiry and shape.
    public func principal(for token: String) async throws(APIError) -> Principal {
        let claims: TicksClaims
        do {
            claims = try await keys.verify(token, as: TicksClaims.self)
        } catch let error as JWTError where error.errorType == .claimVerificationFailure {
            throw .unauthorized("token has expired")
        } catch {
            throw .unauthorized("token signature is invalid")
        }
        if claims.server == true { return .server }
        guard let userID = claims.userID, !userID.isEmpty else {
            throw .unauthorized("token has neither \"server\": true nor a user_id")
        }
        return .user(userID)
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
