import LockwipeCore
import Logging

extension MessageID {
    /// The id as a journal field (`"message_id": MessageID.locked.metadata`).
    public var metadata: Logger.MetadataValue { .string(rawValue) }
}
