/// A message as it travels on the wire (Stream's shape).
public struct Message: Codable, Sendable, Equatable {
    public var id: String
    public var cid: ChannelID
    public var text: String
    public var user: User
    public var createdAt: Timestamp
    public var updatedAt: Timestamp
    public var custom: [String: JSONValue]
    /// Present on `GET /messages/{id}`.
    public var channel: Channel?
    /// When it was deleted; its `type` is then `deleted`.
    public var deletedAt: Timestamp?
    /// When its text was last edited; nil when never.
    public var textUpdatedAt: Timestamp?
    /// The thread's parent, for a reply.
    public var parentID: String?
    /// A reply also shown in the channel.
    public var showInChannel = false
    /// How many replies it has (a thread's parent).
    public var replyCount = 0
    /// Stream's attachments, as sent (`type`, `asset_url`, …); `audio`,
    /// `video` and `voiceRecording` ones make the message playable (R14).
    public var attachments: [JSONValue] = []

    /// The attachment types a member may mark played (`POST /messages/{id}/played`, R14).
    public static let playableAttachmentTypes: Set<String> = ["audio", "video", "voiceRecording"]

    /// Whether it carries an audio or video attachment (R14).
    public var isPlayable: Bool { Self.isPlayable(attachments) }

    public static func isPlayable(_ attachments: [JSONValue]) -> Bool {
        attachments.contains { attachment in
            if case .object(let fields) = attachment, case .string(let type)? = fields["type"] {
                return playableAttachmentTypes.contains(type)
            }
            return false
        }
    }

    /// Stream's message type: `deleted` once deleted, `reply` for a reply
    /// shown only in its thread, else `regular`.
    public var type: String {
        deletedAt != nil ? "deleted" : parentID != nil && !showInChannel ? "reply" : "regular"
    }

    public init(
        id: String, cid: ChannelID, text: String, user: User, createdAt: Timestamp,
        updatedAt: Timestamp, custom: [String: JSONValue] = [:], channel: Channel? = nil,
        deletedAt: Timestamp? = nil, textUpdatedAt: Timestamp? = nil
    ) {
        self.id = id
        self.cid = cid
        self.text = text
        self.user = user
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.custom = custom
        self.channel = channel
        self.deletedAt = deletedAt
        self.textUpdatedAt = textUpdatedAt
    }

    /// Stream's message fields: a client may send them, but they are never stored as custom data.
    public static let reserved: Set<String> = [
        "id", "cid", "text", "type", "user", "user_id", "created_at", "updated_at", "attachments",
        "mentioned_users", "latest_reactions", "own_reactions", "reaction_counts", "reaction_scores",
        "reaction_groups", "reply_count", "deleted_reply_count", "parent_id", "show_in_channel", "silent",
        "html", "mml", "quoted_message_id", "quoted_message", "pinned", "pinned_at", "pin_expires",
        "pinned_by", "restricted_visibility", "skip_push", "command", "args", "i18n", "deleted_at",
        "shadowed", "status", "thread_participants", "poll_id", "channel", "message_text_updated_at",
        "skip_enrich_url", "member",
    ]

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        id = try c.decode(String.self, forKey: AnyCodingKey("id"))
        cid = try c.decode(ChannelID.self, forKey: AnyCodingKey("cid"))
        text = try c.decodeIfPresent(String.self, forKey: AnyCodingKey("text")) ?? ""
        user = try c.decode(User.self, forKey: AnyCodingKey("user"))
        createdAt = try c.decode(Timestamp.self, forKey: AnyCodingKey("created_at"))
        updatedAt = try c.decode(Timestamp.self, forKey: AnyCodingKey("updated_at"))
        channel = try c.decodeIfPresent(Channel.self, forKey: AnyCodingKey("channel"))
        deletedAt = try c.decodeIfPresent(Timestamp.self, forKey: AnyCodingKey("deleted_at"))
        textUpdatedAt = try c.decodeIfPresent(Timestamp.self, forKey: AnyCodingKey("message_text_updated_at"))
        parentID = try c.decodeIfPresent(String.self, forKey: AnyCodingKey("parent_id"))
        showInChannel = try c.decodeIfPresent(Bool.self, forKey: AnyCodingKey("show_in_channel")) ?? false
        replyCount = try c.decodeIfPresent(Int.self, forKey: AnyCodingKey("reply_count")) ?? 0
        attachments = try c.decodeIfPresent([JSONValue].self, forKey: AnyCodingKey("attachments")) ?? []
        custom = try c.customFields(excluding: Self.reserved, in: decoder.apiVersion)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: AnyCodingKey.self)
        try c.encode(id, forKey: AnyCodingKey("id"))
        try c.encode(cid, forKey: AnyCodingKey("cid"))
        try c.encode(text, forKey: AnyCodingKey("text"))
        try c.encode(type, forKey: AnyCodingKey("type"))
        try c.encode(user, forKey: AnyCodingKey("user"))
        try c.encode(createdAt, forKey: AnyCodingKey("created_at"))
        try c.encode(updatedAt, forKey: AnyCodingKey("updated_at"))
        let written = encoder.apiVersion == .v2 ? attachments.map(Self.v2Attachment) : attachments
        try c.encode(written, forKey: AnyCodingKey("attachments"))
        try c.encode([JSONValue](), forKey: AnyCodingKey("mentioned_users"))
        try c.encode([JSONValue](), forKey: AnyCodingKey("latest_reactions"))
        try c.encode([JSONValue](), forKey: AnyCodingKey("own_reactions"))
        try c.encode([String: JSONValue](), forKey: AnyCodingKey("reaction_counts"))
        try c.encode(replyCount, forKey: AnyCodingKey("reply_count"))
        try c.encodeIfPresent(parentID, forKey: AnyCodingKey("parent_id"))
        if parentID != nil { try c.encode(showInChannel, forKey: AnyCodingKey("show_in_channel")) }
        try c.encodeIfPresent(deletedAt, forKey: AnyCodingKey("deleted_at"))
        try c.encodeIfPresent(textUpdatedAt, forKey: AnyCodingKey("message_text_updated_at"))
        try c.encodeIfPresent(channel, forKey: AnyCodingKey("channel"))
        try c.encodeCustom(custom, excluding: Self.reserved, in: encoder.apiVersion)
        guard encoder.apiVersion == .v2 else { return }
        // The rest of v2's MessageResponse: what Ticks does not have is empty or off.
        try c.encode("", forKey: AnyCodingKey("html"))
        try c.encode([String: Int](), forKey: AnyCodingKey("reaction_scores"))
        try c.encode(0, forKey: AnyCodingKey("deleted_reply_count"))
        for off in ["shadowed", "mentioned_channel", "mentioned_here", "silent", "pinned"] {
            try c.encode(false, forKey: AnyCodingKey(off))
        }
        try c.encode([String](), forKey: AnyCodingKey("restricted_visibility"))
    }

    /// An attachment as v2 writes it: an object has `custom` (v2 requires it).
    static func v2Attachment(_ attachment: JSONValue) -> JSONValue {
        guard case .object(var fields) = attachment, fields["custom"] == nil else { return attachment }
        fields["custom"] = .object([:])
        return .object(fields)
    }
}
