import Foundation
import Hummingbird
import TicksProtocol

/// The task of a bulk call Ticks finishes before it answers
/// (`POST /channels/delete`, `POST /users/delete`): Stream's SDKs poll
/// `GET /tasks/{id}` for it, and find it completed with one result per item.
struct CompletedTask {
    var startedAt: Timestamp
    var result: [String: JSONValue] = [:]

    init(startedAt: Timestamp = .now()) { self.startedAt = startedAt }

    mutating func succeeded(_ item: String) {
        result[item] = .object(["status": .string("ok")])
    }

    mutating func failed(_ item: String, _ error: String) {
        result[item] = .object(["status": .string("error"), "error": .string(error)])
    }

    struct TaskID: Encodable {
        var taskID: String

        enum CodingKeys: String, CodingKey { case taskID = "task_id" }
    }

    /// Keeps the task and answers 201 with its id.
    func save(in store: any TicksStore, answering context: TicksRequestContext) async throws -> Response {
        let task = StoredTask(
            id: UUID().uuidString.lowercased(), status: "completed", result: result, createdAt: startedAt,
            updatedAt: .now())
        try await store.saveTask(task)
        return try context.respond(TaskID(taskID: task.id), status: .created)
    }
}
