import Crypto
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
            let keys = VaultKeys(stateDirectory: dir, sealer: CredentialSealer(setting: .none))
            let made = try await keys.newKey(passcode: nil, policy: PasscodePolicy(), registration: RegistrationID("reg-1"), at: 100)
            #expect(made.key.count == Fscrypt.keySize)
            #expect(made.stored.wrapped.wrapping == .machine && made.stored.wrapped.isBound && made.stored.passcodeSetAt == nil)
            #expect(made.stored.identifier.bytes == (try VaultKeys.keyIdentifier(made.key)))
            #expect(try await keys.openWithMachineKey(made.stored.wrapped, binding: RegistrationID("reg-1")) == made.key)
            await #expect(throws: KeyWrapError.wrongPasscode) { try await keys.openWithMachineKey(made.stored.wrapped, binding: RegistrationID("reg-2")) }
            // The machine key was created once, in the state directory, and a second
            // VaultKeys (a restart) reads the same one.
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == [MachineKey.fileName])
            #expect(
                try await VaultKeys(stateDirectory: dir, sealer: CredentialSealer(setting: .none)).openWithMachineKey(made.stored.wrapped, binding: RegistrationID("reg-1"))
                    == made.key)
        }
    }

    @Test func aKeyMadeWithAPasscodeOpensOnlyWithItAndIsWrappedAgainUnderANewOne() async throws {
        try await withStateDirectory { dir in
            let keys = VaultKeys(stateDirectory: dir, sealer: CredentialSealer(setting: .none))
            let made = try await keys.newKey(passcode: "first passcode", policy: PasscodePolicy(), registration: RegistrationID("reg-1"), at: 100)
            #expect(made.stored.wrapped.wrapping == .passcode && made.stored.passcodeSetAt == 100)
            #expect(try await keys.open(made.stored.wrapped, passcode: "first passcode", binding: RegistrationID("reg-1")) == made.key)
            await #expect(throws: KeyWrapError.wrongPasscode) { try await keys.open(made.stored.wrapped, passcode: "first passcodE", binding: RegistrationID("reg-1")) }
            let cheap = WrappedKey.ScryptParameters(logN: 10, r: 8, p: 1)
            let again = try await keys.wrap(made.key, passcode: "second passcode", binding: RegistrationID("reg-1"), parameters: cheap)
            #expect(try await keys.open(again, passcode: "second passcode", binding: RegistrationID("reg-1")) == made.key)
            // The wrap is of format 3: the machine key (made now) is needed too.
            #expect(made.stored.wrapped.format == 3 && again.format == 3)
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == [MachineKey.fileName])
        }
    }

    @Test func withARecoveryKeyEveryWrapAlsoSealsTheKeyToIt() async throws {
        try await withStateDirectory { dir in
            let organisation = Curve25519.KeyAgreement.PrivateKey()
            let recovery = RecoveryPublicKey(organisation.publicKey)
            let keys = VaultKeys(stateDirectory: dir, sealer: CredentialSealer(setting: .none), recoveryKey: recovery)
            let id = RegistrationID("reg-1")
            let made = try await keys.newKey(passcode: nil, policy: PasscodePolicy(), registration: id, at: 0)
            let wrap = try #require(made.stored.wrapped.recovery)
            #expect(try RecoveryKey.unwrap(wrap, privateKey: organisation, registration: id) == made.key)
            #expect(!keys.lacksRecovery(made.stored.wrapped))
            let cheap = WrappedKey.ScryptParameters(logN: 10, r: 8, p: 1)
            let again = try await keys.wrap(made.key, passcode: "a passcode", binding: id, parameters: cheap)
            #expect(try RecoveryKey.unwrap(try #require(again.recovery), privateKey: organisation, registration: id) == made.key)
            // A key wrapped before the recovery key was configured lacks one, and gets one
            // with its wrap unchanged.
            let before = try await VaultKeys(stateDirectory: dir, sealer: CredentialSealer(setting: .none)).wrapWithMachineKey(made.key, binding: id)
            #expect(before.recovery == nil && keys.lacksRecovery(before))
            let added = try await keys.withRecovery(before, key: made.key, binding: id)
            #expect(added.sealed == before.sealed && added.format == before.format && !keys.lacksRecovery(added))
            // One sealed to another recovery key lacks one to this key.
            let other = VaultKeys(stateDirectory: dir, sealer: CredentialSealer(setting: .none), recoveryKey: RecoveryPublicKey(Curve25519.KeyAgreement.PrivateKey().publicKey))
            #expect(other.lacksRecovery(added))
            // A key file of an older version (no "recovery") still reads.
            let old = try JSONDecoder().decode(WrappedKey.self, from: Data(#"{"salt":"","sealed":"AAAA","wrapping":"machine","format":2}"#.utf8))
            #expect(old.recovery == nil)
        }
    }

    @Test func aMachineKeyThatDoesNotOpenIsSetAsideAndMadeAnewOnlyWhenRecovering() async throws {
        try await withStateDirectory { dir in
            // A damaged machine key (a plain file of the wrong size): unavailable, and
            // nothing replaces it by itself.
            let damaged = [UInt8](repeating: 7, count: 5)
            FileManager.default.createFile(atPath: dir + "/" + MachineKey.fileName, contents: Data(damaged), attributes: [.posixPermissions: 0o600])
            let keys = VaultKeys(stateDirectory: dir, sealer: CredentialSealer(setting: .none))
            #expect(await keys.machineKeyState().problem != nil)
            #expect(await keys.machineKeyState().problem != nil)
            let (state, aside) = await keys.replaceUnavailableMachineKey()
            #expect(state.problem == nil)
            #expect(aside == dir + "/" + MachineKey.fileName + ".unopenable-1")
            #expect(FileManager.default.contents(atPath: try #require(aside)) == Data(damaged))
            let key = try await keys.machineKey()
            // A key that opens is kept: a second recovery changes nothing.
            let (again, none) = await keys.replaceUnavailableMachineKey()
            #expect(none == nil && again.problem == nil)
            #expect(try await keys.machineKey() == key)
            #expect(Set(try FileManager.default.contentsOfDirectory(atPath: dir)) == [MachineKey.fileName, MachineKey.fileName + ".unopenable-1"])
        }
    }

    @Test func thePasscodePolicyRefusesBeforeAnyKeyIsMade() async throws {
        try await withStateDirectory { dir in
            let keys = VaultKeys(stateDirectory: dir, sealer: CredentialSealer(setting: .none))
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

/// What a copy of the disk gets, decided from the vault's kind, its wrap and the machine
/// key's sealing; and how a credential's header names its sealing.
@Suite struct AtRestTests {
    @Test(arguments: [
        (Protection.permissions, false, KeySealing?.some(.tpm2), AtRest.none),
        (.permissions, true, nil, .none),
        (.encrypted, true, .tpm2, .passcode),
        (.encrypted, false, .tpm2, .tpm2),
        (.encrypted, false, .host, .host),
        (.encrypted, false, .plain, .disk),
        (.encrypted, false, nil, .disk),
    ])
    func eachVaultIsReportedAsWhatACopyOfTheDiskGetsOfIt(protection: Protection, passcode: Bool, sealing: KeySealing?, expected: AtRest) {
        #expect(AtRest.of(protection, passcodeAlone: passcode, sealing: sealing) == expected)
        #expect(expected.copyOpensIt == [.host, .disk, .none].contains(expected))
    }

    @Test func aCredentialsHeaderNamesWhatSealsIt() {
        // The first 16 bytes of a credential are the id of its key kind (systemd's creds-util.h).
        func credential(_ hex: String) -> [UInt8] {
            let bytes = stride(from: 0, to: hex.count, by: 2).map { UInt8(hex.dropFirst($0).prefix(2), radix: 16)! } + [UInt8](repeating: 7, count: 40)
            return Array(Data(bytes).base64EncodedString().utf8)
        }
        #expect(CredentialSealer.sealing(ofCredential: credential("5a1c6a86df9d4096b1d5a65e0862f19a")) == .host)
        #expect(CredentialSealer.sealing(ofCredential: credential("0c7cc07b117645919c4b0bea08bc20fe")) == .tpm2)
        #expect(CredentialSealer.sealing(ofCredential: credential("93a894094874449090caf2fc93cab553")) == .tpm2)
        #expect(CredentialSealer.sealing(ofCredential: credential("00000000000000000000000000000000")) == nil)
        #expect(CredentialSealer.sealing(ofCredential: Array("not base64 at all!".utf8)) == nil)
    }
}
