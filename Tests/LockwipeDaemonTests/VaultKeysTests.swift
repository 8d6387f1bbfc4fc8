import Foundation
import LockwipeCore
import LockwipeVaultIO
import Testing

@testable import LockwipeDaemon

/// VaultKeys on its own: no Manager, no store, a temporary state directory.
@Suite struct VaultKeysTests {
    func withStateDirectory(_ body: (String) async throws -> Void) async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("vaultkeys-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await body(dir)
    }

    @Test func aKeyMadeWithoutAPasscodeOpensWithTheMachineKeyBoundToItsRegistration() async throws {
        try await withStateDirectory { dir in
            let keys = VaultKeys(stateDirectory: dir)
            let made = try await keys.newKey(passcode: nil, policy: PasscodePolicy(), registration: RegistrationID("reg-1"), at: 100)
            #expect(made.key.count == Fscrypt.keySize)
            #expect(made.stored.wrapped.wrapping == .machine && made.stored.wrapped.isBound && made.stored.passcodeSetAt == nil)
            #expect(made.stored.identifier.bytes == (try VaultKeys.keyIdentifier(made.key)))
            #expect(try await keys.openWithMachineKey(made.stored.wrapped, binding: RegistrationID("reg-1")) == made.key)
            await #expect(throws: KeyWrapError.wrongPasscode) { try await keys.openWithMachineKey(made.stored.wrapped, binding: RegistrationID("reg-2")) }
            // The machine key was created once, in the state directory, and a second
            // VaultKeys (a restart) reads the same one.
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == [MachineKey.fileName])
            #expect(try await VaultKeys(stateDirectory: dir).openWithMachineKey(made.stored.wrapped, binding: RegistrationID("reg-1")) == made.key)
        }
    }

    @Test func aKeyMadeWithAPasscodeOpensOnlyWithItAndIsWrappedAgainUnderANewOne() async throws {
        try await withStateDirectory { dir in
            let keys = VaultKeys(stateDirectory: dir)
            let made = try await keys.newKey(passcode: "first passcode", policy: PasscodePolicy(), registration: RegistrationID("reg-1"), at: 100)
            #expect(made.stored.wrapped.wrapping == .passcode && made.stored.passcodeSetAt == 100)
            #expect(try await keys.open(made.stored.wrapped, passcode: "first passcode", binding: RegistrationID("reg-1")) == made.key)
            await #expect(throws: KeyWrapError.wrongPasscode) { try await keys.open(made.stored.wrapped, passcode: "first passcodE", binding: RegistrationID("reg-1")) }
            let cheap = WrappedKey.ScryptParameters(logN: 10, r: 8, p: 1)
            let again = try await keys.wrap(made.key, passcode: "second passcode", binding: RegistrationID("reg-1"), parameters: cheap)
            #expect(try await keys.open(again, passcode: "second passcode", binding: RegistrationID("reg-1")) == made.key)
            // No machine key is needed, so none is made.
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir).isEmpty)
        }
    }

    @Test func thePasscodePolicyRefusesBeforeAnyKeyIsMade() async throws {
        try await withStateDirectory { dir in
            let keys = VaultKeys(stateDirectory: dir)
            var policy = PasscodePolicy()
            policy.minLength = 12
            await #expect { try await keys.newKey(passcode: "short", policy: policy, registration: RegistrationID("r"), at: 0) } throws: { error in
                "\(error)".hasPrefix("the passcode breaks the passcode policy: ")
            }
            policy.defaultPasswordAllowed = false
            await #expect { try await keys.newKey(passcode: nil, policy: policy, registration: RegistrationID("r"), at: 0) } throws: { error in
                "\(error)".hasPrefix("the passcode policy does not allow the default passcode (default_password_allowed = false)")
            }
            let left = try FileManager.default.contentsOfDirectory(atPath: dir)
            #expect(left.isEmpty)
        }
    }
}
