import Crypto
import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeVaultIO
import Synchronization

/// A vault key just made at registration: the raw key (wiped once registration is done)
/// and what the store keeps of it.
struct NewVault {
    var key: [UInt8]
    var stored: StoredVaultKey
}

/// The owner of vault key material: the machine key (the default passcode, read or
/// created once), making a new vault key and wrapping it, opening a wrapped key with the
/// machine key or a passcode, and wrapping an open key again.
///
/// Every call that derives a key from a passcode (scrypt: about a tenth of a second and
/// 32 MiB) or reads the machine key file runs on the shared thread pool (`BlockingPool`),
/// never on the Manager's actor. Nothing here needs serializing beyond the machine key's
/// first read, which a lock guards: key changes of one user are serialized by the
/// Manager's per-user turn, and those of different users touch different keys.
final class VaultKeys: Sendable {
    private let stateDirectory: String
    private let machineKeyCache = Mutex<SymmetricKey?>(nil)

    init(stateDirectory: String) {
        self.stateDirectory = stateDirectory
    }

    // MARK: Making

    /// A fresh 512-bit vault key, wrapped by `passcode` (which must satisfy `policy`) or,
    /// without one, by the machine key where the policy allows the default passcode.
    /// Refusals are `RegistrationRefusal`s, in the registration's words.
    func newKey(passcode: String?, policy: PasscodePolicy, registration: RegistrationID?, at now: Int64) async throws -> NewVault {
        if let passcode {
            if let problem = policy.problem(with: passcode) { throw RegistrationRefusal("the passcode breaks the passcode policy: " + problem) }
        } else if !policy.defaultPasswordAllowed {
            throw RegistrationRefusal(
                "the passcode policy does not allow the default passcode (default_password_allowed = false): give the user's first passcode (lockwipectl register --passcode-stdin)"
            )
        }
        return try await BlockingPool.run { [self] in
            var key = try SecRandom.key(Fscrypt.keySize)
            do {
                let wrapped =
                    try passcode.map { try KeyWrap.wrap(key, passcode: $0, registration: registration) }
                    ?? KeyWrap.wrap(key, machineKey: try machineKeyNow(), registration: registration)
                let id = Fscrypt.KeyIdentifier(bytes: try Self.keyIdentifier(key))
                return NewVault(key: key, stored: StoredVaultKey(identifier: id, wrapped: wrapped, passcodeSetAt: passcode == nil ? nil : now))
            } catch {
                key.wipe()
                throw error
            }
        }
    }

    /// The identifier the kernel derives for a v2 key: HKDF-SHA512 with the info
    /// "fscrypt\0" ‖ 1 (HKDF_CONTEXT_KEY_IDENTIFIER), 16 bytes. Lets registration check
    /// what the kernel reports without asking it first.
    static func keyIdentifier(_ key: [UInt8]) throws -> [UInt8] {
        let info = Array("fscrypt".utf8) + [0, 1]
        let derived = HKDF<SHA512>.deriveKey(inputKeyMaterial: SymmetricKey(data: key), info: info, outputByteCount: 16)
        return derived.withUnsafeBytes { Array($0) }
    }

    // MARK: Opening

    /// Opens a key the machine key wraps; `binding` is what the wrap is bound to.
    func openWithMachineKey(_ wrapped: WrappedKey, binding: RegistrationID?) async throws -> [UInt8] {
        try await BlockingPool.run { [self] in try KeyWrap.unwrap(wrapped, machineKey: try machineKeyNow(), registration: binding) }
    }

    /// Opens a key a passcode wraps (one scrypt run). A wrong passcode throws
    /// `KeyWrapError.wrongPasscode`.
    func open(_ wrapped: WrappedKey, passcode: String, binding: RegistrationID?) async throws -> [UInt8] {
        try await BlockingPool.run { try KeyWrap.unwrap(wrapped, passcode: passcode, registration: binding) }
    }

    // MARK: Wrapping again

    /// Wraps an open key under `passcode` (a new salt, one scrypt run).
    func wrap(_ key: [UInt8], passcode: String, binding: RegistrationID?, parameters: WrappedKey.ScryptParameters = .standard) async throws -> WrappedKey {
        try await BlockingPool.run { try KeyWrap.wrap(key, passcode: passcode, registration: binding, parameters: parameters) }
    }

    /// Wraps an open key under the machine key.
    func wrapWithMachineKey(_ key: [UInt8], binding: RegistrationID?) async throws -> WrappedKey {
        try await BlockingPool.run { [self] in try KeyWrap.wrap(key, machineKey: try machineKeyNow(), registration: binding) }
    }

    // MARK: The machine key

    /// The machine key, read or created at the first call (blocking: on the pool only).
    private func machineKeyNow() throws -> SymmetricKey {
        try machineKeyCache.withLock { cache in
            if let key = cache { return key }
            let key = try MachineKey.loadOrCreate(stateDirectory: stateDirectory)
            cache = key
            return key
        }
    }
}
