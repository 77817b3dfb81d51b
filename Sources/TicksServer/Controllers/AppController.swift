import Foundation
import Hummingbird
import TicksProtocol

/// `GET /app` (the app's settings, as Stream answers them, with the limits in
/// force), `PATCH /app` (the settings kept in the store, `AppOptions`) and
/// `GET /rate_limits` (Stream's quota report: the rate limits in force).
struct AppController {
    let store: any TicksStore
    let options: AppOptionsCache
    let rateLimiter: RateLimiter
    let limits: ServerLimits
    let rateLimits: RateLimits
    let apiKey: String
    let webhooks: WebhookSettings

    func addRoutes(to group: RouterGroup<TicksRequestContext>) {
        group.on(.getApp, use: app)
        group.on(.updateApp, use: update)
        group.on(.getRateLimits, use: quotas)
    }

    struct AppSettings: Encodable {
        var name: String
        var placement = "self-hosted"
        var permissionVersion = "v2"
        var disableAuthChecks = false
        var disablePermissionsChecks = false
        /// Every channel type's config by name, as the request's API version writes it (`configs(_:in:)`).
        var channelConfigs: [String: JSONValue]
        var limits: LimitSettings
        /// Stream's single-webhook fields: the first webhook, and its event types.
        var webhookURL: String?
        var webhookEvents: [String]?
        /// Server tokens only (the URLs are the app's own).
        var eventHooks: [EventHook]?
        var webhookDelivery: DeliverySettings
        /// R15 (`PATCH /app`).
        var reciprocalReadReceipts: Bool
        /// How sends count unread (`PATCH /app`, `AppOptions.UnreadCounting`).
        var unreadCounting: AppOptions.UnreadCounting

        enum CodingKeys: String, CodingKey {
            case name, placement, limits
            case reciprocalReadReceipts = "reciprocal_read_receipts"
            case unreadCounting = "unread_counting"
            case webhookURL = "webhook_url"
            case webhookEvents = "webhook_events"
            case eventHooks = "event_hooks"
            case webhookDelivery = "webhook_delivery"
            case permissionVersion = "permission_version"
            case disableAuthChecks = "disable_auth_checks"
            case disablePermissionsChecks = "disable_permissions_checks"
            case channelConfigs = "channel_configs"
        }
    }

    /// A webhook or the push hook, in the shape of Stream's `event_hooks`.
    struct EventHook: Encodable {
        var hookType: String
        var webhookURL: String
        var eventTypes: [String]
        var enabled = true

        enum CodingKeys: String, CodingKey {
            case enabled
            case hookType = "hook_type"
            case webhookURL = "webhook_url"
            case eventTypes = "event_types"
        }
    }

    /// How calls are retried (`ticks serve --webhook-*`).
    struct DeliverySettings: Encodable {
        var maxAttempts: Int
        var firstBackoffSeconds: Double
        var maxBackoffSeconds: Double
        var callTimeoutSeconds: Double
        var concurrency: Int
        var maxAgeSeconds: Int64
        var deadRetentionSeconds: Int64
        var maxWaitingPerReceiver: Int
        var maxDead: Int
        var deliveryTokenSeconds: Int64
        var pushRecipientsPerCall: Int

        enum CodingKeys: String, CodingKey {
            case concurrency
            case maxAttempts = "max_attempts"
            case firstBackoffSeconds = "first_backoff_seconds"
            case maxBackoffSeconds = "max_backoff_seconds"
            case callTimeoutSeconds = "call_timeout_seconds"
            case maxAgeSeconds = "max_age_seconds"
            case deadRetentionSeconds = "dead_retention_seconds"
            case maxWaitingPerReceiver = "max_waiting_per_receiver"
            case maxDead = "max_dead"
            case deliveryTokenSeconds = "delivery_token_seconds"
            case pushRecipientsPerCall = "push_recipients_per_call"
        }

        init(_ settings: WebhookSettings) {
            maxAttempts = settings.maxAttempts
            firstBackoffSeconds = settings.firstBackoff.inSeconds
            maxBackoffSeconds = settings.maxBackoff.inSeconds
            callTimeoutSeconds = settings.callTimeout.inSeconds
            concurrency = settings.concurrency
            maxAgeSeconds = settings.maxAge.components.seconds
            deadRetentionSeconds = settings.deadRetention.components.seconds
            maxWaitingPerReceiver = settings.maxWaiting
            maxDead = settings.maxDead
            deliveryTokenSeconds = settings.deliveryTokenLifetime.components.seconds
            pushRecipientsPerCall = settings.pushRecipientsPerCall
        }
    }

    /// The webhooks, then the push hook, each by its name: never its credentials or query.
    var eventHooks: [EventHook] {
        let hooks = webhooks.webhooks.map { hook in
            EventHook(
                hookType: "webhook", webhookURL: ReceiverURL(hook.url.absoluteString).name,
                eventTypes: WebhookSettings.eventTypes.filter(hook.wants).map(\.rawValue))
        }
        let push = webhooks.pushURL.map {
            EventHook(
                hookType: "push", webhookURL: ReceiverURL($0.absoluteString).name,
                eventTypes: [EventType.messageNew.rawValue])
        }
        return hooks + (push.map { [$0] } ?? [])
    }

    struct LimitSettings: Encodable {
        var maxBodyBytes: Int
        var maxCustomDataBytes: Int
        var maxChannelMembers: Int
        var maxFilterValues: Int
        var maxConnectionsPerUser: Int
        var connectionBufferBytes: Int
        var maxInboundFrameBytes: Int
        var idleTimeoutSeconds: Int64
        var headerTimeoutSeconds: Int64
        var syncEventsPerChannel: Int
        var syncEventsPerAnswer: Int

        enum CodingKeys: String, CodingKey {
            case maxBodyBytes = "max_body_bytes"
            case maxCustomDataBytes = "max_custom_data_bytes"
            case maxChannelMembers = "max_channel_members"
            case maxFilterValues = "max_filter_values"
            case maxConnectionsPerUser = "max_connections_per_user"
            case connectionBufferBytes = "connection_buffer_bytes"
            case maxInboundFrameBytes = "max_inbound_frame_bytes"
            case idleTimeoutSeconds = "idle_timeout_seconds"
            case headerTimeoutSeconds = "header_timeout_seconds"
            case syncEventsPerChannel = "sync_events_per_channel"
            case syncEventsPerAnswer = "sync_events_per_answer"
        }
    }

    @Sendable func app(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let hooks = try context.requirePrincipal() == .server ? eventHooks : nil
        let webhook = hooks?.first { $0.hookType == "webhook" }
        let types = try await store.channelTypes()
        let current = try await options.current()
        let settings = AppSettings(
            name: apiKey,
            channelConfigs: try Self.configs(types, in: context.apiVersion),
            limits: LimitSettings(
                maxBodyBytes: ServerLimits.maxBodyBytes, maxCustomDataBytes: limits.maxCustomDataBytes,
                maxChannelMembers: limits.maxChannelMembers, maxFilterValues: limits.maxFilterValues,
                maxConnectionsPerUser: limits.maxConnectionsPerUser,
                connectionBufferBytes: limits.connectionBufferBytes,
                maxInboundFrameBytes: limits.maxInboundFrameBytes,
                idleTimeoutSeconds: limits.idleTimeout.components.seconds,
                headerTimeoutSeconds: limits.headerTimeout.components.seconds,
                syncEventsPerChannel: limits.syncEventsPerChannel, syncEventsPerAnswer: limits.syncEventsPerAnswer),
            webhookURL: webhook?.webhookURL, webhookEvents: webhook?.eventTypes, eventHooks: hooks,
            webhookDelivery: DeliverySettings(webhooks),
            reciprocalReadReceipts: current.reciprocalReadReceipts, unreadCounting: current.unreadCounting)
        return try context.respond("app", first: AppFields(settings: settings))
    }

    /// The channel types as `app.channel_configs`: v2's `ChannelConfig` has
    /// `commands` as names (a channel's `config` has them as objects).
    static func configs(_ types: [ChannelConfig], in version: APIVersion) throws -> [String: JSONValue] {
        try Dictionary(
            uniqueKeysWithValues: types.map { config in
                let fields =
                    version == .v2
                    ? try ChannelTypesController.withCommandNames(config, in: version)
                    : try JSONCoding.object(config)
                return (config.name, .object(fields))
            })
    }

    /// `app` as the request's version writes it: v2's `AppResponseFields`
    /// requires some 50 fields; those for what Ticks does not have are
    /// written empty, off or zero, and the hooks (a server token's only)
    /// empty for other tokens.
    struct AppFields: Encodable {
        var settings: AppSettings

        func encode(to encoder: any Encoder) throws {
            try settings.encode(to: encoder)
            guard encoder.apiVersion == .v2 else { return }
            var c = encoder.container(keyedBy: AnyCodingKey.self)
            if settings.eventHooks == nil {
                try c.encode("", forKey: AnyCodingKey("webhook_url"))
                try c.encode([String](), forKey: AnyCodingKey("webhook_events"))
                try c.encode([EventHook](), forKey: AnyCodingKey("event_hooks"))
            } else if settings.webhookURL == nil {
                try c.encode("", forKey: AnyCodingKey("webhook_url"))
                try c.encode([String](), forKey: AnyCodingKey("webhook_events"))
            }
            for name in Self.emptyStrings { try c.encode("", forKey: AnyCodingKey(name)) }
            try c.encode("no", forKey: AnyCodingKey("enforce_unique_usernames"))
            for name in Self.zeros { try c.encode(0, forKey: AnyCodingKey(name)) }
            for name in Self.off { try c.encode(false, forKey: AnyCodingKey(name)) }
            // Ticks has no guest users (Stream's POST /guest).
            try c.encode(true, forKey: AnyCodingKey("guest_user_creation_disabled"))
            try c.encode([String](), forKey: AnyCodingKey("user_search_disallowed_roles"))
            for name in ["call_types", "policies", "grants"] {
                try c.encode([String: JSONValue](), forKey: AnyCodingKey(name))
            }
            try c.encode(PushSettings(), forKey: AnyCodingKey("push_notifications"))
            // Ticks takes no uploads.
            for name in ["file_upload_config", "image_upload_config"] {
                try c.encode(["size_limit": 0], forKey: AnyCodingKey(name))
            }
        }

        static let emptyStrings = [
            "organization", "moderation_webhook_url", "suspended_explanation", "custom_action_handler_url", "sqs_url",
            "sqs_key", "sqs_secret", "sns_topic_arn", "sns_key", "sns_secret",
        ]
        static let zeros = ["id", "reminders_interval", "cdn_expiration_seconds", "max_aggregated_activities_length"]
        static let off = [
            "suspended", "multi_tenant_enabled", "allow_multi_user_devices", "image_moderation_enabled",
            "async_url_enrich_enabled", "auto_translation_enabled", "campaign_enabled", "moderation_enabled",
            "moderation_multitenant_blocklist_enabled", "use_hook_v2", "user_response_time_enabled",
            "moderation_llm_configurability_enabled", "feed_audit_logs_enabled",
            "moderation_video_call_moderation_enabled", "moderation_audio_call_moderation_enabled",
            "member_custom_on_messages_enabled", "member_custom_on_mentioned_users_enabled",
            "member_custom_on_typing_events_enabled", "moderation_keyframe_video_enabled",
        ]

        /// Stream's push providers: none (Ticks calls a push hook, `event_hooks`).
        struct PushSettings: Encodable {
            struct Enabled: Encodable { var enabled = false }
            struct APN: Encodable {
                var enabled = false
                var development = false
            }
            var version = "v2"
            var offlineOnly = false
            var apn = APN()
            var firebase = Enabled()
            var huawei = Enabled()
            var xiaomi = Enabled()

            enum CodingKeys: String, CodingKey {
                case version, apn, firebase, huawei, xiaomi
                case offlineOnly = "offline_only"
            }
        }
    }

    /// `PATCH /app` (server tokens): changes the settings it names, which
    /// must be ones Ticks keeps (`AppOptions.Change`); Stream's others are
    /// refused rather than ignored, so that nobody believes one took effect.
    @Sendable func update(_ request: Request, context: TicksRequestContext) async throws -> Response {
        guard case .server = try context.requirePrincipal() else {
            throw APIError.forbidden("only a server token may change the app's settings")
        }
        var request = request
        let fields = try await request.decodeJSON([String: JSONValue].self)
        let known = Set(AppOptions.Change.CodingKeys.allCases.map(\.rawValue))
        if let unknown = fields.keys.sorted().first(where: { !known.contains($0) }) {
            throw APIError.input(
                "app setting '\(unknown.prefix(64))' is not one Ticks keeps; it keeps: \(known.sorted().joined(separator: ", "))")
        }
        guard !fields.isEmpty else { throw APIError.input("the body names no app setting to change") }
        if let unset = fields.first(where: { $0.value == .null })?.key {
            throw APIError.input("app setting '\(unset)' is null: a setting is changed to a value, never unset")
        }
        let change = try await request.decodeJSON(AppOptions.Change.self)
        let options = try await options.update(change)
        context.logger.notice(
            "app settings changed",
            metadata: [
                "reciprocal_read_receipts": "\(options.reciprocalReadReceipts)",
                "unread_counting": "\(options.unreadCounting.rawValue)",
            ])
        return try context.respond(Empty())
    }

    /// One endpoint's quota as Stream reports it.
    struct Quota: Encodable {
        var limit: Int
        var remaining: Int
        var reset: Int64
    }

    struct QuotaReport: Encodable {
        var serverSide: [String: Quota]?
        var android: [String: Quota]?
        var ios: [String: Quota]?
        var web: [String: Quota]?

        enum CodingKeys: String, CodingKey {
            case serverSide = "server_side"
            case android, ios, web
        }
    }

    /// `GET /rate_limits?server_side=true&android=true&ios=true&web=true&endpoints=A,B`:
    /// without platform flags, all four. `server_side` counts the app's server
    /// tokens; the client platforms show the per-user limits and, for a user
    /// token, that user's remaining calls (Ticks does not tell platforms apart).
    @Sendable func quotas(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let principal = try context.requirePrincipal()
        func flag(_ name: String) -> Bool { request.queryParameter(name).map { $0 == "true" || $0 == "1" } ?? false }
        let platforms = ["server_side", "android", "ios", "web"].filter(flag)
        let wanted = platforms.isEmpty ? ["server_side", "android", "ios", "web"] : platforms
        var endpoints = APIEndpoint.allCases
        if let names = request.queryParameter("endpoints"), !names.isEmpty {
            let named = try names.split(separator: ",").map { name in
                guard let endpoint = APIEndpoint(rawValue: name.trimmingCharacters(in: .whitespaces)) else {
                    throw APIError.input("endpoints: '\(name.prefix(64))' is not an endpoint")
                }
                return endpoint
            }
            // An endpoint named twice is reported once.
            endpoints = endpoints.filter(named.contains)
        }
        func report(_ identity: RateLimiter.Identity?) -> [String: Quota] {
            Dictionary(
                uniqueKeysWithValues: endpoints.map { endpoint in
                    let limit = rateLimits.limit(for: endpoint)
                    guard rateLimits.enabled, let identity else {
                        let value = identity == .app ? limit.serverSide : limit.user
                        return (endpoint.rawValue, Quota(limit: value, remaining: value, reset: nextReset()))
                    }
                    let decision = rateLimiter.peek(endpoint, by: identity)
                    return (endpoint.rawValue, Quota(limit: decision.limit, remaining: decision.remaining, reset: decision.reset))
                })
        }
        let client: RateLimiter.Identity? = if case .user(let userID) = principal { .user(userID) } else { nil }
        let clients = report(client)
        var answer = QuotaReport()
        if wanted.contains("server_side") { answer.serverSide = report(.app) }
        if wanted.contains("android") { answer.android = clients }
        if wanted.contains("ios") { answer.ios = clients }
        if wanted.contains("web") { answer.web = clients }
        return try context.respond(answer)
    }

    /// The end of the current window, in Unix seconds.
    func nextReset() -> Int64 {
        let window = max(rateLimits.window.components.seconds, 1)
        return (Int64(Date().timeIntervalSince1970) / window + 1) * window
    }
}
