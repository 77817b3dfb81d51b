/// A user as it travels on the wire. Fields Ticks does not model are kept as
/// `custom` and written back at the top level of the object.
public struct User: Codable, Sendable, Equatable {
    public var id: String
    public var name: String?
    public var image: String?
    public var role: String?
    public var privacySettings: PrivacySettings?
    public var createdAt: Timestamp?
    public var updatedAt: Timestamp?
    public var custom: [String: JSONValue]

    public init(
        id: String, name: String? = nil, image: String? = nil, role: String? = nil,
        privacySettings: PrivacySettings? = nil, createdAt: Timestamp? = nil,
        updatedAt: Timestamp? = nil, custom: [String: JSONValue] = [:]
    ) {
        self.id = id
        self.name = name
        self.image = image
        self.role = role
        self.privacySettings = privacySettings
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.custom = custom
    }

    /// Fields the server computes or that Stream treats as reserved: never stored as custom data.
    public static let reserved: Set<String> = [
        "id", "name", "image", "role", "privacy_settings", "created_at", "updated_at",
        "online", "last_active", "banned", "teams", "language", "invisible", "deactivated_at",
        "deleted_at", "revoke_tokens_issued_before", "push_notifications", "total_unread_count",
        "unread_channels", "unread_count", "channel_unread_count", "channel_last_read_at",
        "shadow_banned", "blocked_user_ids",
    ]

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        id = try c.decode(String.self, forKey: AnyCodingKey("id"))
        name = try c.decodeIfPresent(String.self, forKey: AnyCodingKey("name"))
        image = try c.decodeIfPresent(String.self, forKey: AnyCodingKey("image"))
        role = try c.decodeIfPresent(String.self, forKey: AnyCodingKey("role"))
        privacySettings = try c.decodeIfPresent(PrivacySettings.self, forKey: AnyCodingKey("privacy_settings"))
        createdAt = try? c.decodeIfPresent(Timestamp.self, forKey: AnyCodingKey("created_at"))
        updatedAt = try? c.decodeIfPresent(Timestamp.self, forKey: AnyCodingKey("updated_at"))
        custom = try c.customFields(excluding: Self.reserved, in: decoder.apiVersion)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: AnyCodingKey.self)
        try c.encode(id, forKey: AnyCodingKey("id"))
        try c.encodeIfPresent(name, forKey: AnyCodingKey("name"))
        try c.encodeIfPresent(image, forKey: AnyCodingKey("image"))
        try c.encode(role ?? "user", forKey: AnyCodingKey("role"))
        try c.encodeIfPresent(privacySettings, forKey: AnyCodingKey("privacy_settings"))
        try c.encodeIfPresent(createdAt, forKey: AnyCodingKey("created_at"))
        try c.encodeIfPresent(updatedAt, forKey: AnyCodingKey("updated_at"))
        try c.encode(false, forKey: AnyCodingKey("banned"))
        try c.encode(false, forKey: AnyCodingKey("online"))
        if encoder.apiVersion == .v2 {
            // v2 requires both times. A user named by a channel or a message
            // whom the store no longer holds (hard-deleted) has none: the
            // Unix epoch, which no user kept by Ticks has, stands for "unknown".
            if createdAt == nil { try c.encode(Timestamp(microseconds: 0), forKey: AnyCodingKey("created_at")) }
            if updatedAt == nil { try c.encode(Timestamp(microseconds: 0), forKey: AnyCodingKey("updated_at")) }
            // Required by v2's UserResponse; Ticks keeps none of them.
            try c.encode("", forKey: AnyCodingKey("language"))
            try c.encode([String](), forKey: AnyCodingKey("teams"))
            try c.encode([String](), forKey: AnyCodingKey("blocked_user_ids"))
            try c.encode(false, forKey: AnyCodingKey("shadow_banned"))
            try c.encode(false, forKey: AnyCodingKey("invisible"))
        }
        try c.encodeCustom(custom, excluding: Self.reserved, in: encoder.apiVersion)
    }

    /// Whether others may see this user's reads (R10). On unless turned off.
    public var sharesReadReceipts: Bool { privacySettings?.readReceipts?.enabled ?? true }
    /// Whether others may see this user's deliveries (R10). On unless turned off.
    public var sharesDeliveryReceipts: Bool { privacySettings?.deliveryReceipts?.enabled ?? true }
    /// Whether others may see the user type (Stream's `privacy_settings.typing_indicators`).
    public var sharesTyping: Bool { privacySettings?.typingIndicators?.enabled ?? true }

    /// Whether `viewer` may see this user's reads in a channel (R8, R10): always
    /// their own; someone else's only with read events on and shared. The
    /// server applies it to what it returns and sends; the SDK to what it infers.
    public func readsVisible(to viewer: String?, readEvents: Bool) -> Bool {
        id == viewer || (readEvents && sharesReadReceipts)
    }

    /// Likewise for deliveries (R8, R9, R10).
    public func deliveriesVisible(to viewer: String?, readEvents: Bool, deliveryEvents: Bool) -> Bool {
        id == viewer || (readEvents && deliveryEvents && sharesDeliveryReceipts)
    }
}

/// `privacy_settings` of a user (Stream's shape).
public struct PrivacySettings: Codable, Sendable, Equatable {
    public struct Toggle: Codable, Sendable, Equatable {
        public var enabled: Bool?
        public init(enabled: Bool?) { self.enabled = enabled }
    }
    public var readReceipts: Toggle?
    public var deliveryReceipts: Toggle?
    public var typingIndicators: Toggle?

    public init(readReceipts: Toggle? = nil, deliveryReceipts: Toggle? = nil, typingIndicators: Toggle? = nil) {
        self.readReceipts = readReceipts
        self.deliveryReceipts = deliveryReceipts
        self.typingIndicators = typingIndicators
    }

    enum CodingKeys: String, CodingKey {
        case readReceipts = "read_receipts"
        case deliveryReceipts = "delivery_receipts"
        case typingIndicators = "typing_indicators"
    }
}
