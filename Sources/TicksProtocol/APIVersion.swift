/// Which of Stream's API generations a request came in on, and so how its
/// body reads and its answer is written. The same handlers serve both.
///
/// - v1 (`/channels/…`, `stream-chat` SDKs): times are RFC 3339 strings,
///   custom data sits at the top level of users, channels and messages.
/// - v2 (`/api/v2/chat/…`, `/api/v2/…`, `getstream` SDKs): times are integer
///   Unix nanoseconds, custom data is the `custom` object, and the fields v2
///   marks required are always written.
public enum APIVersion: Sendable, Equatable {
    case v1, v2

    /// The version a request path speaks.
    public init(path: some StringProtocol) {
        self = path.hasPrefix("/api/v2/") ? .v2 : .v1
    }
}

extension CodingUserInfoKey {
    /// The `APIVersion` a body is read or written in; v1 when absent.
    public static let apiVersion = CodingUserInfoKey(rawValue: "ticks.apiVersion")!
}

extension Encoder {
    public var apiVersion: APIVersion { userInfo[.apiVersion] as? APIVersion ?? .v1 }
}

extension Decoder {
    public var apiVersion: APIVersion { userInfo[.apiVersion] as? APIVersion ?? .v1 }
}
