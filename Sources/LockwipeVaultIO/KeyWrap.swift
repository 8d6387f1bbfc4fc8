import Crypto
import CryptoExtras
import Foundation
import LockwipeCore

/// A vault key as it is stored: never in the clear, only sealed with AES-256-GCM under a
/// key derived from the user's passcode (scrypt, parameters stored beside it), or, where
/// the policy allows the default passcode and the user has none, under the machine key.
public struct WrappedKey: Codable, Sendable, Equatable {
    public enum Wrapping: String, Codable, Sendable {
        case passcode
        /// SAP's default data-vault passcode: the machine key in the state directory.
        case machine
    }

    public struct ScryptParameters: Codable, Sendable, Equatable {
        /// log2 of scrypt's N (CPU/memory cost).
        public var logN: Int
        public var r: Int
        public var p: Int

        package init(logN: Int, r: Int, p: Int) {
            self.logN = logN
            self.r = r
            self.p = p
        }

        /// 2^15 × 8 × 128 B = 32 MiB and about a tenth of a second per attempt here: every
        /// guess at a stolen database costs the same.
        public static let standard = ScryptParameters(logN: 15, r: 8, p: 1)
    }

    public var wrapping: Wrapping
    public var salt: Data
    public var scrypt: ScryptParameters?
    /// nonce ‖ ciphertext ‖ tag.
    public var sealed: Data
    /// The wrap format (see `KeyWrap`): nil or 1, no associated data; 2, the registration
    /// id is the associated data; 3 (passcode wraps only), the key-encryption key also
    /// needs the machine key.
    public var format: Int?
    /// The same vault key sealed to the organisation's recovery key (`RecoveryKey`), when
    /// one is configured; absent in files of older versions and where none is.
    public var recovery: RecoveryWrap?
    /// Which machine key the wrap needs (`KeyWrap.machineKeyIdentifier`), when it needs one;
    /// absent in files of older versions. Tells a wrap that needs `lockwipectl recover`
    /// (made under a machine key since set aside) from one that opens.
    public var machineKeyID: String?

    public init(
        wrapping: Wrapping, salt: Data, scrypt: ScryptParameters?, sealed: Data, format: Int? = nil, recovery: RecoveryWrap? = nil, machineKeyID: String? = nil
    ) {
        self.wrapping = wrapping
        self.salt = salt
        self.scrypt = scrypt
        self.sealed = sealed
        self.format = format
        self.recovery = recovery
        self.machineKeyID = machineKeyID
    }

    /// Whether the wrap binds the key to its registration (format 2 and later).
    public var isBound: Bool { (format ?? 1) >= 2 }

    /// Whether opening it needs the machine key: a machine wrap, or a passcode wrap of
    /// format 3.
    public var needsMachineKey: Bool { wrapping == .machine || (format ?? 1) >= 3 }

    /// Whether it is of an older format than this version wraps in (`KeyWrap.currentFormat`).
    public var isOutdated: Bool { (format ?? 1) < KeyWrap.currentFormat(wrapping) }
}

public enum KeyWrapError: Error, Equatable, CustomStringConvertible {
    /// The passcode (or machine key) does not open this wrapped key.
    case wrongPasscode
    case malformed(String)
    /// A passcode wrap of format 3 was to be opened or made without the machine key.
    case needsMachineKey

    public var description: String {
        switch self {
        case .wrongPasscode: return "wrong passcode"
        case .malformed(let why): return "the stored key is unreadable: \(why)"
        case .needsMachineKey: return "the passcode wrap also needs the machine key"
        }
    }
}

/// Wrapping and unwrapping vault keys.
///
/// Wrap format 2 (every key wrapped since issue 12) authenticates the registration id as
/// AES-GCM associated data ("lockwipe vault key\0" ‖ id): a wrapped key moved to another
/// registration (another row, another key file name) does not open there, even with
/// the right passcode or the machine key. Format 1 (nil: keys wrapped before) has no
/// associated data and still opens; the daemon wraps such a key again in format 2 the
/// next time it holds it open (an unlock, a passcode set or change, a start-up reopen).
///
/// Wrap format 3 (passcode wraps since issue 43): the key-encryption key is HKDF-SHA256 of
/// the scrypt output followed by the machine key (info "lockwipe passcode wrap\0"), so
/// that a guess at the passcode needs the machine key, which is sealed to this machine's
/// TPM2 where there is one: a copy of the disk cannot be guessed at elsewhere. A passcode
/// wrap of format 2 still opens with the passcode alone, and is wrapped again in format 3
/// the next time the daemon holds it open.
public enum KeyWrap {
    /// The format this version wraps in: 2 for a machine wrap, 3 for a passcode wrap.
    public static func currentFormat(_ wrapping: WrappedKey.Wrapping) -> Int { wrapping == .passcode ? 3 : 2 }

    /// A passcode wrap: format 3 with `machineKey` (and a registration), else format 2
    /// (or 1 without a registration, for tests of old data).
    public static func wrap(
        _ key: [UInt8], passcode: String, machineKey: SymmetricKey?, registration: RegistrationID?, parameters: WrappedKey.ScryptParameters = .standard
    ) throws -> WrappedKey {
        let salt = Data((0..<16).map { _ in UInt8.random(in: 0...255) })
        let format: Int? = registration == nil ? nil : (machineKey == nil ? 2 : 3)
        let kek = try passcodeKey(passcode, salt: salt, parameters, machineKey: format == 3 ? machineKey : nil)
        return WrappedKey(
            wrapping: .passcode, salt: salt, scrypt: parameters, sealed: try seal(key, kek, aad(registration)), format: format,
            machineKeyID: format == 3 ? machineKey.map(machineKeyIdentifier) : nil)
    }

    public static func wrap(_ key: [UInt8], machineKey: SymmetricKey, registration: RegistrationID?) throws -> WrappedKey {
        WrappedKey(
            wrapping: .machine, salt: Data(), scrypt: nil, sealed: try seal(key, machineKey, aad(registration)),
            format: registration == nil ? nil : currentFormat(.machine), machineKeyID: machineKeyIdentifier(machineKey))
    }

    /// Names a machine key without giving anything of it away: the first 8 bytes of
    /// HMAC-SHA256 under it of "lockwipe machine key identifier", in hex.
    public static func machineKeyIdentifier(_ machineKey: SymmetricKey) -> String {
        HMAC<SHA256>.authenticationCode(for: Data("lockwipe machine key identifier".utf8), using: machineKey).prefix(8)
            .map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// Opens a passcode wrap; one of format 3 needs `machineKey`.
    public static func unwrap(_ wrapped: WrappedKey, passcode: String, machineKey: SymmetricKey?, registration: RegistrationID?) throws -> [UInt8] {
        guard wrapped.wrapping == .passcode, let parameters = wrapped.scrypt else {
            throw KeyWrapError.malformed("not wrapped by a passcode")
        }
        let data = try associatedData(wrapped, registration)
        if wrapped.needsMachineKey && machineKey == nil { throw KeyWrapError.needsMachineKey }
        let kek = try passcodeKey(passcode, salt: wrapped.salt, parameters, machineKey: wrapped.needsMachineKey ? machineKey : nil)
        return try open(wrapped.sealed, kek, data)
    }

    /// scrypt of the passcode; with `machineKey`, HKDF-SHA256 of it and the machine key.
    private static func passcodeKey(_ passcode: String, salt: Data, _ p: WrappedKey.ScryptParameters, machineKey: SymmetricKey?) throws -> SymmetricKey {
        let derived = try derive(passcode, salt: salt, p)
        guard let machineKey else { return derived }
        var material = derived.withUnsafeBytes { Array($0) } + machineKey.withUnsafeBytes { Array($0) }
        defer { material.wipe() }
        return HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: material), info: Data("lockwipe passcode wrap".utf8) + Data([0]), outputByteCount: 32)
    }

    public static func unwrap(_ wrapped: WrappedKey, machineKey: SymmetricKey, registration: RegistrationID?) throws -> [UInt8] {
        guard wrapped.wrapping == .machine else { throw KeyWrapError.malformed("not wrapped by the machine key") }
        return try open(wrapped.sealed, machineKey, try associatedData(wrapped, registration))
    }

    package static func aad(_ registration: RegistrationID?) -> Data {
        registration.map(RecoveryKey.binding) ?? Data()
    }

    private static func associatedData(_ wrapped: WrappedKey, _ registration: RegistrationID?) throws -> Data {
        switch wrapped.format ?? 1 {
        case 1: return Data()
        case 3 where wrapped.wrapping == .passcode: fallthrough
        case 2:
            guard let registration else { throw KeyWrapError.malformed("bound to a registration id, and none was given") }
            return aad(registration)
        case let other: throw KeyWrapError.malformed("unknown wrap format \(other)")
        }
    }

    private static func derive(_ passcode: String, salt: Data, _ p: WrappedKey.ScryptParameters) throws -> SymmetricKey {
        guard (10...20).contains(p.logN), (1...32).contains(p.r), (1...16).contains(p.p) else {
            throw KeyWrapError.malformed("scrypt parameters out of range (log2 N \(p.logN), r \(p.r), p \(p.p))")
        }
        return try KDF.Scrypt.deriveKey(
            from: Array(passcode.utf8), salt: salt, outputByteCount: 32, rounds: 1 << p.logN, blockSize: p.r, parallelism: p.p)
    }

    private static func seal(_ key: [UInt8], _ kek: SymmetricKey, _ aad: Data) throws -> Data {
        guard let combined = try AES.GCM.seal(key, using: kek, authenticating: aad).combined else { throw KeyWrapError.malformed("AES-GCM gave no output") }
        return combined
    }

    private static func open(_ sealed: Data, _ kek: SymmetricKey, _ aad: Data) throws -> [UInt8] {
        let box: AES.GCM.SealedBox
        do {
            box = try AES.GCM.SealedBox(combined: sealed)
        } catch {
            throw KeyWrapError.malformed("not an AES-GCM sealed box")
        }
        do {
            return Array(try AES.GCM.open(box, using: kek, authenticating: aad))
        } catch {
            throw KeyWrapError.wrongPasscode  // authentication failed: the tag does not match
        }
    }
}
