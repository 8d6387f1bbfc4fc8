import LockwipeCore

/// An operation on registration `id` found it gone: unregistered meanwhile (its name may
/// be held by a new registration, which the operation did not touch). Inside the
/// registration's turn this cannot happen (unregistering takes the turn); a turn that
/// meets it says `noSuchRegistration` (`Registration.withTurn`).
public struct RegistrationGone: Error, Sendable, Equatable, CustomStringConvertible {
    public var id: RegistrationID
    public var description: String { "registration \(id) is no longer registered" }
}
