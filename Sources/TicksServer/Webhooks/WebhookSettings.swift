import Foundation
import TicksProtocol

/// Where the server calls out, and how hard it tries (docs/webhooks.md).
/// Set at start (`ticks serve --webhook`, `--push-hook`, ...); `GET /app`
/// reports it.
public struct WebhookSettings: Sendable, Equatable {
    /// Webhooks: each gets every event of the types it names.
    public var webhooks: [Webhook] = []
    /// The push hook: one call per new message, naming the members with no
    /// open socket, each with a delivery-only token.
    public var pushURL: URL?
    /// Failed calls are tried again until this many attempts, then dead
    /// (with the backoffs below, about half an hour after the first failure).
    public var maxAttempts = 12
    /// The first retry waits this long, each next one twice as long, up to `maxBackoff`.
    public var firstBackoff: Duration = .seconds(1)
    public var maxBackoff: Duration = .seconds(600)
    /// What one call may take before it counts as failed.
    public var callTimeout: Duration = .seconds(5)
    /// Calls in flight at once (each to a different receiver or channel).
    public var concurrency = 16
    /// A call still not delivered this long after its change is dead.
    public var maxAge: Duration = .seconds(24 * 3600)
    /// Dead calls are kept this long for `POST /webhooks/failed/retry`, then removed.
    public var deadRetention: Duration = .seconds(7 * 24 * 3600)
    /// Calls that may wait for one receiver; the oldest beyond are dead
    /// (with a receiver down, the outbox holds at most this many for it).
    public var maxWaiting = 100_000
    /// Dead calls kept in all; the oldest beyond are removed.
    public var maxDead = 100_000
    /// What the outbox keeps (`maxAge`, `maxWaiting`, `deadRetention`, `maxDead`).
    var bounds: OutboxBounds {
        OutboxBounds(maxAge: maxAge, maxWaiting: maxWaiting, deadRetention: deadRetention, maxDead: maxDead)
    }

    /// How long a push hook's delivery-only token is valid.
    public var deliveryTokenLifetime: Duration = .seconds(6 * 3600)
    /// Members named in one push call; a message to more offline members makes several calls.
    public var pushRecipientsPerCall = 1_000

    public init() {}

    public var isEnabled: Bool { !webhooks.isEmpty || pushURL != nil }

    /// Every receiver's URL, each once: the webhooks', then the push hook's.
    var receiverURLs: [URL] {
        var seen = Set<String>()
        return (webhooks.map(\.url) + (pushURL.map { [$0] } ?? [])).filter { seen.insert($0.absoluteString).inserted }
    }

    /// Every receiver by its name (`ReceiverURL.name`), each once: what the outbox's rows say.
    var targets: [String] { receiverURLs.map { ReceiverURL($0.absoluteString).name } }

    /// The URL of the receiver the outbox names `name`, credentials and all; nil when none is configured.
    func url(ofReceiver name: String) -> URL? {
        receiverURLs.first { ReceiverURL($0.absoluteString).name == name }
    }

    /// A webhook: its URL and the event types it gets (every type when nil).
    public struct Webhook: Sendable, Equatable {
        public var url: URL
        public var eventTypes: Set<EventType>?

        public init(url: URL, eventTypes: Set<EventType>? = nil) {
            self.url = url
            self.eventTypes = eventTypes
        }

        func wants(_ type: EventType) -> Bool { eventTypes?.contains(type) ?? true }
    }

    /// The events a webhook can be sent: changes to messages, receipts,
    /// members and channels. (Notifications addressed to one user's devices,
    /// such as `notification.mark_read`, are not, but for
    /// `notification.mark_unread`, which has no other event.)
    public static let eventTypes: [EventType] = [
        .messageNew, .messageUpdated, .messageDeleted, .messageRead, .messageDelivered, .notificationMarkUnread,
        .memberAdded, .memberRemoved, .channelCreated, .channelUpdated, .channelDeleted, .channelTruncated,
        .messageReadByAll, .messageDeliveredToAll, .messagePlayed,
    ]

    /// Parses `--webhook-events`: comma-separated event types, or `all`.
    public static func eventTypes(parsing text: String) throws -> Set<EventType>? {
        let names = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        if names == ["all"] { return nil }
        var types = Set<EventType>()
        for name in names {
            guard let type = EventType(rawValue: name), eventTypes.contains(type) else {
                throw WebhookSettingsError.unknownEventType(name, known: eventTypes.map(\.rawValue))
            }
            types.insert(type)
        }
        guard !types.isEmpty else { throw WebhookSettingsError.noEventTypes }
        return types
    }

    /// A receiver URL: http or https with a host.
    public static func url(parsing text: String) throws -> URL {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            url.host?.isEmpty == false
        else { throw WebhookSettingsError.badURL(ReceiverURL(text).redacted) }
        return url
    }

    /// Checks the numbers, and that no two receivers share a name; the CLI calls it before starting.
    public func validate() throws {
        guard maxAttempts >= 1, concurrency >= 1, pushRecipientsPerCall >= 1, maxWaiting >= 1, maxDead >= 1,
            callTimeout > .zero, firstBackoff > .zero, maxBackoff >= firstBackoff, maxAge > .zero,
            deliveryTokenLifetime >= .seconds(60)
        else { throw WebhookSettingsError.badNumbers }
        var named = Set<String>()
        for name in targets where !named.insert(name).inserted {
            throw WebhookSettingsError.sameReceiverName(name)
        }
    }
}

/// A receiver's URL as the settings keep it, and the ways it goes out: its
/// name, in a log, an error, `GET /webhooks/failed` and the outbox's rows,
/// only its scheme, host, port and path (never a `user:password@` part or a
/// query, which often hold secrets: nothing in the database, and so in a
/// backup, holds them); on the wire, its `user:password@` part as HTTP Basic
/// authentication (docs/webhooks.md), since a URL's credentials are not sent
/// by themselves.
struct ReceiverURL: Sendable {
    /// The URL without its user information.
    let requestURL: String
    /// `Basic …` from the URL's user information, when it has some.
    let authorization: String?
    /// What a log may say of it.
    let redacted: String
    /// How the outbox names the receiver: what a log may say of it.
    var name: String { redacted }

    init(_ text: String) {
        guard var components = URLComponents(string: text), let scheme = components.scheme, let host = components.host
        else {
            requestURL = text
            authorization = nil
            redacted = "(a URL that could not be read)"
            return
        }
        let port = components.port.map { ":\($0)" } ?? ""
        redacted = "\(scheme)://\(host)\(port)\(components.percentEncodedPath)"
        if components.percentEncodedUser != nil || components.percentEncodedPassword != nil {
            let credentials = "\(components.user ?? ""):\(components.password ?? "")"
            authorization = "Basic " + Data(credentials.utf8).base64EncodedString()
            components.percentEncodedUser = nil
            components.percentEncodedPassword = nil
            requestURL = components.string ?? text
        } else {
            authorization = nil
            requestURL = text
        }
    }
}

public enum WebhookSettingsError: Error, CustomStringConvertible, Equatable {
    case unknownEventType(String, known: [String])
    case noEventTypes
    case badURL(String)
    case badNumbers
    case sameReceiverName(String)

    public var description: String {
        switch self {
        case .unknownEventType(let name, let known):
            "'\(name)' is not an event type webhooks send; they are: all, \(known.joined(separator: ", "))"
        case .noEventTypes: "--webhook-events names no event type"
        case .badURL(let text): "'\(text)' is not an http(s) URL"
        case .badNumbers:
            "webhook attempts, concurrency, calls kept and recipients per call must be at least 1, timeouts and ages positive, the delivery-token lifetime at least 60 s"
        case .sameReceiverName(let name):
            "two receivers differ only in their credentials or query (\(name)): the outbox names a receiver without them, so give each its own path"
        }
    }
}

extension Timestamp {
    static func + (time: Timestamp, duration: Duration) -> Timestamp {
        Timestamp(microseconds: time.microseconds + duration.wholeMicroseconds)
    }

    static func - (time: Timestamp, duration: Duration) -> Timestamp {
        Timestamp(microseconds: time.microseconds - duration.wholeMicroseconds)
    }
}
