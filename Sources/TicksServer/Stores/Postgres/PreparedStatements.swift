import PostgresNIO
import TicksProtocol
import TicksReceipts

/// The statements PostgreSQL keeps prepared on each connection (parsed and
/// planned once, not on every receipt): `StoreQuery.prepared` names them,
/// and their text and parameter types come from `StoreSQL` itself.
protocol PreparedShape {
    static var sql: String { get }
    static var bindingDataTypes: [PostgresDataType] { get }
}

extension PreparedShape {
    /// The text and the parameters' types of a sample of the statement (the
    /// text is the same for every call; only the values differ).
    static func shape(of sample: StoreQuery) -> (sql: String, types: [PostgresDataType]) {
        let (text, bindings) = SQLDialect.postgres.render(sample)
        return (
            text,
            bindings.map { binding in
                switch binding {
                case .value(.int): .int8
                case .value(.text), .value(.null): .text
                case .array(.texts): .textArray
                case .array(.ints): .int8Array
                }
            }
        )
    }
}

/// `StoreSQL.moves`: a batch of marks read and delivered, the call of `MovesFunction`.
enum Moves: PreparedShape {
    private static let shape = shape(of: StoreSQL.moves([MovesFunction.sampleMove], schema: .newest))
    static var sql: String { shape.sql }
    static var bindingDataTypes: [PostgresDataType] { shape.types }
}

/// `StoreSQL.channel(_:member:)`: the channel of a receipt and whether its reader is a member.
enum ChannelWithMembership: PreparedShape {
    private static let shape = shape(of: StoreSQL.channel(ChannelID(type: "t", id: "i"), member: "u"))
    static var sql: String { shape.sql }
    static var bindingDataTypes: [PostgresDataType] { shape.types }
}

/// `StoreSQL.send`: a message stored and its author's read, the call of `SendFunction`.
enum Send: PreparedShape {
    private static let shape = shape(of: StoreSQL.sampleSend)
    static var sql: String { shape.sql }
    static var bindingDataTypes: [PostgresDataType] { shape.types }
}

/// `StoreSQL.channel(pk:lock:)` locked: the channel every send (and most changes) locks first.
enum LockedChannel: PreparedShape {
    private static let shape = shape(of: StoreSQL.channel(pk: 0, lock: true))
    static var sql: String { shape.sql }
    static var bindingDataTypes: [PostgresDataType] { shape.types }
}

/// `StoreSQL.channelType(_:)` unlocked: a send's channel type, read before its turn.
enum ChannelType: PreparedShape {
    private static let shape = shape(of: StoreSQL.channelType("t"))
    static var sql: String { shape.sql }
    static var bindingDataTypes: [PostgresDataType] { shape.types }
}

/// `StoreSQL.users(_:)`: users by id (a send's author, after its commit).
enum Users: PreparedShape {
    private static let shape = shape(of: StoreSQL.users(["u"]))
    static var sql: String { shape.sql }
    static var bindingDataTypes: [PostgresDataType] { shape.types }
}

/// A prepared statement of shape `Shape` with one call's values.
struct PreparedStoreStatement<Shape: PreparedShape>: PostgresPreparedStatement {
    typealias Row = PostgresRow

    static var name: String { "ticks_\(Shape.self)" }
    static var sql: String { Shape.sql }
    static var bindingDataTypes: [PostgresDataType] { Shape.bindingDataTypes }

    let bindings: PostgresBindings

    func makeBindings() throws -> PostgresBindings { bindings }
    func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
}
