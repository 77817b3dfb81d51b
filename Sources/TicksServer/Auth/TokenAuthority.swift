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

/// What a token lets its holder do: act as its principal, or — a
/// delivery-only token (docs/webhooks.md) — only mark messages of one
/// channel delivered for its user.
public struct TokenGrant: Sendable, Equatable {
    public var principal: Principal
    /// Set for a delivery-only token: the one channel it may mark delivered in.
    public var deliveryOnly: ChannelID?
}

/// The claims of Stream's tokens, and Ticks' delivery-only tokens
/// (`scope` "delivery" and the channel's cid).
struct TicksClaims: JWTPayload, Equatable {
    var server: Bool?
    var userID: String?
    var exp: ExpirationClaim?
    var scope: String? = nil
    var channelCID: String? = nil

    static let deliveryScope = "delivery"

    enum CodingKeys: String, CodingKey {
        case server
        case userID = "user_id"
        case exp
        case scope
        case channelCID = "channel_cid"
    }

    /// The signature only: expiry is checked on the authority's clock (`TokenAuthority.grant`).
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// Signs and checks HS256 tokens with the app secret.
public struct TokenAuthority: Sendable {
    public let credentials: Credentials
    private let keys: JWTKeyCollection
    /// Tokens whose signature checked out, with their expiry: clients send the
    /// same token on every call, and the check is most of a small request's cost.
    private let verified: VerifiedTokens
    /// Whose time decides expiry, and the expiry of the tokens it signs.
    private let time: TimeSource

    /// - Parameters:
    ///   - cacheBytes: what the verified tokens may hold.
    ///   - time: the clock of expiry (`wallNow`); a test's clock in tests.
    public init(credentials: Credentials, cacheBytes: Int = 16 << 20, time: TimeSource = .system) async {
        self.credentials = credentials
        self.verified = VerifiedTokens(maxEntries: 100_000, maxBytes: cacheBytes)
        self.time = time
        self.keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: credentials.apiSecret), digestAlgorithm: .sha256)
    }

    /// The one algorithm a token may name in its header (docs/api.md, "Authentication").
    static let algorithm = "HS256"

    /// Whether the token's header names HS256: read before the signature, so
    /// that a token saying `none`, another algorithm or nothing is refused
    /// even when its signature is a valid HMAC-SHA256 of the secret.
    static func namesHS256(_ token: String) -> Bool {
        struct Header: Decodable { var alg: String }
        guard let end = token.utf8.firstIndex(of: UInt8(ascii: ".")) else { return false }
        var base64 = String(token[..<end]).replacingOccurrences(of: "-", with: "+")
            .replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.utf8.count % 4) % 4)
        guard let data = Data(base64Encoded: base64),
            let header = try? JSONDecoder().decode(Header.self, from: data)
        else { return false }
        return header.alg == algorithm
    }

    /// Checks the token's signature, expiry and shape; what it may do.
    public func principal(for token: String) async throws(APIError) -> Principal {
        try await grant(for: token).principal
    }

    /// Checks the token's signature, expiry and shape; who it acts as and whether it may only mark delivered.
    public func grant(for token: String) async throws(APIError) -> TokenGrant {
        let now = time.wallNow.date
        if let known = verified.grant(for: token, at: now) { return known }
        guard Self.namesHS256(token) else {
            throw .unauthorized("token's header must name the algorithm HS256")
        }
        let claims: TicksClaims
        do {
            claims = try await keys.verify(token, as: TicksClaims.self)
        } catch {
            throw .unauthorized("token signature is invalid")
        }
        if let expiry = claims.exp?.value, expiry <= now { throw .tokenExpired("token has expired") }
        let principal = try Self.principal(of: claims)
        var grant = TokenGrant(principal: principal)
        if let scope = claims.scope {
            guard scope == TicksClaims.deliveryScope, let cid = claims.channelCID.flatMap(ChannelID.init(cid:)),
                claims.exp != nil
            else { throw .unauthorized("token has an unknown scope, or a delivery scope without channel_cid and exp") }
            grant.deliveryOnly = cid
        }
        verified.remember(token, grant, expires: claims.exp?.value)
        return grant
    }

    /// Who a signed token's claims name. Stream's rule: a token that names
    /// no user acts as the server (`getstream` signs `{}`), as does
    /// `"server": true`. A `user_id` that is not a valid id, a scope without a
    /// user, and `"server": false` without a user are refused.
    static func principal(of claims: TicksClaims) throws(APIError) -> Principal {
        switch (claims.userID, claims.server, claims.scope) {
        case (_, true?, nil), (nil, nil, nil):
            return .server
        case (let userID?, _, _):
            guard Identifier.isValid(userID) else { throw .unauthorized("token's user_id is not a valid user id") }
            return .user(userID)
        case (nil, _, _?):
            throw .unauthorized("token has a scope but no user_id")
        case (nil, _, nil):
            throw .unauthorized("token says \"server\": false and names no user_id")
        }
    }

    /// A delivery-only token (docs/webhooks.md): it may only mark messages of
    /// `channel` delivered for `userID` — not read, not send, not connect — and expires.
    public func deliveryToken(for userID: String, in channel: ChannelID, expiresIn: Duration) async throws -> String {
        let expiry = (time.wallNow.date.timeIntervalSince1970 + expiresIn.inSeconds).rounded(.down)
        return try await keys.sign(
            TicksClaims(
                server: nil, userID: userID,
                exp: ExpirationClaim(value: Date(timeIntervalSince1970: expiry)),
                scope: TicksClaims.deliveryScope, channelCID: channel.description))
    }

    /// A user token, optionally expiring.
    public func userToken(for userID: String, expiresIn: TimeInterval? = nil) async throws -> String {
        try await keys.sign(
            TicksClaims(
                server: nil, userID: userID, exp: expiresIn.map { ExpirationClaim(value: time.wallNow.date + $0) }))
    }

    /// A server token, optionally expiring (`ticks status` sends one good for a minute).
    public func serverToken(expiresIn: TimeInterval? = nil) async throws -> String {
        try await keys.sign(
            TicksClaims(
                server: true, userID: nil, exp: expiresIn.map { ExpirationClaim(value: time.wallNow.date + $0) }))
    }
}

/// Verified tokens and what they grant, until they expire; bounded in entries
/// and bytes (`BoundedCache`): forgotten tokens are simply verified again.
final class VerifiedTokens: Sendable {
    struct Entry {
        let grant: TokenGrant
        let expires: Date?
    }
    let entries: BoundedCache<String, Entry>

    init(maxEntries: Int, maxBytes: Int) {
        entries = BoundedCache(maxEntries: maxEntries, maxBytes: maxBytes)
    }

    /// The principal of a token verified before and not expired at `now`.
    func principal(for token: String, at now: Date) -> Principal? {
        grant(for: token, at: now)?.principal
    }

    /// What a token verified before and not expired at `now` grants.
    func grant(for token: String, at now: Date) -> TokenGrant? {
        guard let entry = entries.value(for: token) else { return nil }
        if let expires = entry.expires, expires <= now {
            entries.removeValue(for: token)
            return nil
        }
        return entry.grant
    }

    func remember(_ token: String, _ principal: Principal, expires: Date?) {
        remember(token, TokenGrant(principal: principal), expires: expires)
    }

    func remember(_ token: String, _ grant: TokenGrant, expires: Date?) {
        let userBytes = if case .user(let id) = grant.principal { id.utf8.count } else { 0 }
        let scopeBytes = grant.deliveryOnly.map { $0.description.utf8.count } ?? 0
        entries.insert(
            Entry(grant: grant, expires: expires), for: token, cost: token.utf8.count + userBytes + scopeBytes + 96)
    }
}
