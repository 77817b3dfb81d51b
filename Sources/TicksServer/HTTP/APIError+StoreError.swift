import TicksProtocol

extension APIError {
    /// Stream's error for a store's refusal.
    init(_ error: StoreError) {
        switch error {
        case .channelTypeExists, .messageIDOfRemovedMessage, .schemaBefore: self = .conflict(error.description)
        case .channelTypeNotFound, .channelNotFound, .messageNotFound: self = .notFound(error.description)
        case .notMember: self = .forbidden(error.description)
        case .inconsistent: self = APIError(status: .internalServerError, code: .internalError, "internal error")
        case .unavailable: self = .unavailable(error.description)
        case .unknownChannelType, .unknownChannel, .unknownUser, .messageNotInChannel, .messageIDInOtherChannel,
            .tooManyMembers, .parentNotFound, .nestedReply, .unstorableText:
            self = .input(error.description)
        }
    }
}
