import GRDB
import LockwipeCore

/// A registration id is stored as the TEXT it always was (`registrations.id`,
/// `events.registration_id`, `offline_codes.registration_id`, ...): records and queries
/// bind and read it as the plain string.
extension RegistrationID: DatabaseValueConvertible {
    public var databaseValue: DatabaseValue { rawValue.databaseValue }

    public static func fromDatabaseValue(_ dbValue: DatabaseValue) -> RegistrationID? {
        String.fromDatabaseValue(dbValue).map(RegistrationID.init)
    }
}
