import TicksProtocol

/// `{"id": "alice"}`: how Stream names a user inside a request.
struct UserRef: Decodable {
    var id: String
}

/// A member as Stream's SDKs send it: `"alice"` or `{"user_id": "alice"}`.
struct MemberRef: Decodable {
    var userID: String

    enum CodingKeys: String, CodingKey {
        case userID = "user_id"
        case user
    }

    init(from decoder: any Decoder) throws {
        if let single = try? decoder.singleValueContainer(), let id = try? single.decode(String.self) {
            userID = id
            return
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if let id = try container.decodeIfPresent(String.self, forKey: .userID) {
            userID = id
        } else if let user = try container.decodeIfPresent(UserRef.self, forKey: .user) {
            userID = user.id
        } else {
            throw DecodingError.keyNotFound(
                CodingKeys.userID, .init(codingPath: decoder.codingPath, debugDescription: "member needs user_id"))
        }
    }
}

/// The fields a call may use to say who acts: `user: {id}` or `user_id`.
struct ActingUserFields: Decodable {
    var user: UserRef?
    var userID: String?

    enum CodingKeys: String, CodingKey {
        case user
        case userID = "user_id"
    }

    /// The user named: `user.id` before `user_id`.
    var named: String? { user?.id ?? userID }

}

/// A Stream filter value on one field: `"x"`, `{"$eq": "x"}` or `{"$in": ["x", "y"]}`.
struct FilterValue: Decodable {
    var values: [String]

    enum Operator: String, CodingKey {
        case eq = "$eq"
        case `in` = "$in"
    }

    init(from decoder: any Decoder) throws {
        if let single = try? decoder.singleValueContainer(), let value = try? single.decode(String.self) {
            values = [value]
            return
        }
        let container = try decoder.container(keyedBy: AnyCodingKey.self)
        guard container.allKeys.count == 1, let key = container.allKeys.first,
            let op = Operator(rawValue: key.stringValue)
        else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "only $eq and $in are supported"))
        }
        switch op {
        case .eq: values = [try container.decode(String.self, forKey: key)]
        case .in: values = try container.decode([String].self, forKey: key)
        }
    }
}

extension ChannelFilter {
    /// The `filter_conditions` of `POST /channels`: `members`, `cid`, `type`
    /// and `id`, each a value, `$eq` or `$in`; anything else is refused with
    /// a 400 rather than ignored.
    init(conditions: [String: FilterValue], limits: ServerLimits) throws {
        self.init()
        for (field, value) in conditions {
            func values(_ rule: IDRule) throws -> [String] {
                try filterValues(value.values, of: field, rule: rule, limits: limits)
            }
            switch field {
            case "members": memberIn = try values(Identifier.id)
            case "cid": cids = try values(Identifier.cid).map { try requireCID($0, "cid") }
            case "type": types = try values(Identifier.channelTypeName)
            case "id": ids = try values(Identifier.channelID)
            default: throw APIError.input("filtering channels on \(Identifier.quoted(field)) is not supported")
            }
        }
    }

    /// An empty `$in` list matches no channel.
    var matchesNothing: Bool {
        [memberIn, cids?.map(\.rawValue), types, ids].contains { $0?.isEmpty == true }
    }
}
