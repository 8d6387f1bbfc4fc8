/// A reason a registration was refused, shown to the operator as is. Here, below the
/// registrations, because the vault's own checks (`VaultPath`, `VaultKeys`) refuse with it.
package struct RegistrationRefusal: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}
