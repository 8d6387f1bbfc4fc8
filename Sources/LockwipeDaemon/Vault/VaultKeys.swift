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
    let sealer: CredentialSealer
    let machineKeyFile: SealedSecret
    private let machineKeyLoad = Mutex<Task<MachineKeyState, Never>?>(nil)
    /// The state once the first call has finished: what `status` and the metrics read,
    /// never waiting for a TPM that may take up to `CredentialSealer.timeLimit`.
    private let machineKeyKnown = Mutex<MachineKeyState?>(nil)

    /// The organisation's recovery key (`[keys] recovery_public_key`): every wrap made here
    /// also seals the vault key to it (`WrappedKey.recovery`).
    let recoveryKey: RecoveryPublicKey?

    init(stateDirectory: String, sealer: CredentialSealer, recoveryKey: RecoveryPublicKey? = nil) {
        self.sealer = sealer
        self.recoveryKey = recoveryKey
        machineKeyFile = SealedSecret(name: "lockwipe-machine-key", plainFile: MachineKey.fileName, stateDirectory: stateDirectory, size: MachineKey.size)
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
        // Both wraps need the machine key: a passcode wrap (format 3) is guessed on this machine or not at all.
        let machineKey = try await machineKey()
        return try await BlockingPool.run { [recoveryKey] in
            var key = try SecRandom.key(Fscrypt.keySize)
            do {
                var wrapped =
                    try passcode.map { try KeyWrap.wrap(key, passcode: $0, machineKey: machineKey, registration: registration) }
                    ?? KeyWrap.wrap(key, machineKey: machineKey, registration: registration)
                try Self.attachRecovery(&wrapped, key, recoveryKey, registration)
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
        let machineKey = try await machineKey()
        return try await BlockingPool.run { try KeyWrap.unwrap(wrapped, machineKey: machineKey, registration: binding) }
    }

    /// Opens a key a passcode wraps (one scrypt run). A wrong passcode throws
    /// `KeyWrapError.wrongPasscode`.
    /// One of format 3 needs the machine key too (`KeyUnavailable` without it).
    func open(_ wrapped: WrappedKey, passcode: String, binding: RegistrationID?) async throws -> [UInt8] {
        let machineKey = wrapped.needsMachineKey ? try await machineKey() : nil
        return try await BlockingPool.run { try KeyWrap.unwrap(wrapped, passcode: passcode, machineKey: machineKey, registration: binding) }
    }

    // MARK: Wrapping again

    /// Wraps an open key under `passcode` and the machine key (format 3: a new salt, one
    /// scrypt run).
    func wrap(_ key: [UInt8], passcode: String, binding: RegistrationID?, parameters: WrappedKey.ScryptParameters = .standard) async throws -> WrappedKey {
        let machineKey = try await machineKey()
        return try await BlockingPool.run { [recoveryKey] in
            var wrapped = try KeyWrap.wrap(key, passcode: passcode, machineKey: machineKey, registration: binding, parameters: parameters)
            try Self.attachRecovery(&wrapped, key, recoveryKey, binding)
            return wrapped
        }
    }

    /// Wraps an open key under the machine key.
    func wrapWithMachineKey(_ key: [UInt8], binding: RegistrationID?) async throws -> WrappedKey {
        let machineKey = try await machineKey()
        return try await BlockingPool.run { [recoveryKey] in
            var wrapped = try KeyWrap.wrap(key, machineKey: machineKey, registration: binding)
            try Self.attachRecovery(&wrapped, key, recoveryKey, binding)
            return wrapped
        }
    }

    // MARK: The organisation's recovery key

    /// Whether `wrapped` lacks a recovery wrap to the configured recovery key (none, or one
    /// to another key): the next time its key is open, it gets one (`withRecovery`).
    func lacksRecovery(_ wrapped: WrappedKey) -> Bool {
        guard let recoveryKey else { return false }
        return wrapped.recovery?.recipient != recoveryKey.identifier
    }

    /// `wrapped` with the open `key` also sealed to the recovery key (the wrap itself unchanged).
    func withRecovery(_ wrapped: WrappedKey, key: [UInt8], binding: RegistrationID) async throws -> WrappedKey {
        try await BlockingPool.run { [recoveryKey] in
            var wrapped = wrapped
            try Self.attachRecovery(&wrapped, key, recoveryKey, binding)
            return wrapped
        }
    }

    /// Seals `key` to the recovery key into `wrapped.recovery` (only for a wrap bound to a
    /// registration, which every wrap made now is).
    private static func attachRecovery(_ wrapped: inout WrappedKey, _ key: [UInt8], _ recoveryKey: RecoveryPublicKey?, _ binding: RegistrationID?) throws {
        guard let recoveryKey, let binding else { return }
        wrapped.recovery = try RecoveryKey.wrap(key, to: recoveryKey, registration: binding)
    }

    // MARK: The machine key

    /// The machine key as this run of lockwiped has it.
    enum MachineKeyState: Sendable {
        /// `sealFailure`: why a plain key could not be sealed (it is used as it is).
        case ready(SymmetricKey, KeySealing, migrated: Bool, created: Bool, sealFailure: String? = nil)
        /// It exists and cannot be opened (or cannot be made): every vault it wraps stays
        /// locked. `sealing`: how its file says it is sealed.
        case unavailable(String, sealing: KeySealing?)

        /// The key, when it can be used.
        var key: SymmetricKey? {
            if case .ready(let key, _, _, _, _) = self { return key }
            return nil
        }

        /// Why it cannot be used, when it cannot.
        var problem: String? {
            if case .unavailable(let reason, _) = self { return reason }
            return nil
        }

        var sealing: KeySealing? {
            switch self {
            case .ready(_, let sealing, _, _, _): return sealing
            case .unavailable(_, let sealing): return sealing
            }
        }
    }

    /// The machine key: opened (a plain one sealed first, when `[keys] seal` seals) or made
    /// at the first call, once per run; the start-up pass makes that call. A key that does
    /// not open stays unavailable until lockwiped is restarted: nothing makes a new one over
    /// it, so nothing it wraps is lost.
    func machineKeyState() async -> MachineKeyState {
        let task = machineKeyLoad.withLock { task in
            if let task { return task }
            let new = Task { [self] in
                let state = await Self.loadOrCreate(machineKeyFile, sealer)
                machineKeyKnown.withLock { $0 = state }
                return state
            }
            task = new
            return new
        }
        return await task.value
    }

    /// The machine key's state if it has been opened (or failed) already; nil while the
    /// first call is under way.
    var machineKeyStateNow: MachineKeyState? { machineKeyKnown.withLock { $0 } }

    /// Why the machine key cannot be used (`KeyUnavailable`), or the key.
    func machineKey() async throws -> SymmetricKey {
        switch await machineKeyState() {
        case .ready(let key, _, _, _, _): return key
        case .unavailable(let reason, _): throw KeyUnavailable(reason: reason)
        }
    }

    /// After `lockwipectl recover`: a machine key that cannot be opened (a cleared TPM, a
    /// new board, a changed PCR) is set aside, never destroyed (`SealedSecret.setAside`),
    /// and a new one made and sealed to the machine as it is now. A key that opens is kept.
    /// Serialized with the first load: every caller after this one gets the new key.
    func replaceUnavailableMachineKey() async -> (state: MachineKeyState, setAside: String?) {
        let task = machineKeyLoad.withLock { task in
            let previous = task
            let new = Task { [self] () -> (MachineKeyState, String?) in
                let before: MachineKeyState
                if let previous { before = await previous.value } else { before = await Self.loadOrCreate(machineKeyFile, sealer) }
                guard case .unavailable = before else { return (before, nil) }
                let after: (MachineKeyState, String?)
                do {
                    let aside = try await machineKeyFile.setAside()
                    after = (await Self.loadOrCreate(machineKeyFile, sealer), aside)
                } catch {
                    after = (.unavailable("it could not be set aside to make a new one: \(ErrorWords.of(error))", sealing: before.sealing), nil)
                }
                machineKeyKnown.withLock { $0 = after.0 }
                return after
            }
            task = Task { await new.value.0 }
            return new
        }
        return await task.value
    }

    private static func loadOrCreate(_ file: SealedSecret, _ sealer: CredentialSealer) async -> MachineKeyState {
        do {
            if var loaded = try await file.load(sealer) {
                defer { loaded.secret.wipe() }
                return .ready(SymmetricKey(data: loaded.secret), loaded.sealing, migrated: loaded.migrated, created: false, sealFailure: loaded.sealFailure)
            }
            var bytes = try SecRandom.key(MachineKey.size)
            defer { bytes.wipe() }
            let (sealing, _) = try await file.store(bytes, sealer)
            return .ready(SymmetricKey(data: bytes), sealing, migrated: false, created: true)
        } catch let error as SealingError {
            return .unavailable(error.description, sealing: error.sealing)
        } catch {
            return .unavailable(ErrorWords.of(error), sealing: nil)
        }
    }
}

/// The machine key exists and cannot be opened (or made): what needs it fails closed.
struct KeyUnavailable: Error, CustomStringConvertible {
    var reason: String
    var description: String { "the machine key cannot be opened (\(reason))" }
}
