import Crypto
import CryptoExtras
import Foundation

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

        /// 2^15 × 8 × 128 B = 32 MiB and about a tenth of a second per attempt here: every
        /// guess at a stolen database costs the same.
        public static let standard = ScryptParameters(logN: 15, r: 8, p: 1)
    }

    public var wrapping: Wrapping
    public var salt: Data
    public var scrypt: ScryptParameters?
    /// nonce ‖ ciphertext ‖ tag.
    public var sealed: Data
}

public enum KeyWrapError: Error, Equatable, CustomStringConvertible {
    /// The passcode (or machine key) does not open this wrapped key.
    case wrongPasscode
    case malformed(String)

    public var description: String {
        switch self {
        case .wrongPasscode: return "wrong passcode"
        case .malformed(let why): return "the stored key is unreadable: \(why)"
        }
    }
}

public enum KeyWrap {
    public static func wrap(_ key: [UInt8], passcode: String, parameters: WrappedKey.ScryptParameters = .standard) throws -> WrappedKey {
        let salt = Data((0..<16).map { _ in UInt8.random(in: 0...255) })
        let kek = try derive(passcode, salt: salt, parameters)
        return WrappedKey(wrapping: .passcode, salt: salt, scrypt: parameters, sealed: try seal(key, kek))
    }

    public static func wrap(_ key: [UInt8], machineKey: SymmetricKey) throws -> WrappedKey {
        WrappedKey(wrapping: .machine, salt: Data(), scrypt: nil, sealed: try seal(key, machineKey))
    }

    public static func unwrap(_ wrapped: WrappedKey, passcode: String) throws -> [UInt8] {
        guard wrapped.wrapping == .passcode, let parameters = wrapped.scrypt else {
            throw KeyWrapError.malformed("not wrapped by a passcode")
        }
        return try open(wrapped.sealed, try derive(passcode, salt: wrapped.salt, parameters))
    }

    public static func unwrap(_ wrapped: WrappedKey, machineKey: SymmetricKey) throws -> [UInt8] {
        guard wrapped.wrapping == .machine else { throw KeyWrapError.malformed("not wrapped by the machine key") }
        return try open(wrapped.sealed, machineKey)
    }

    private static func derive(_ passcode: String, salt: Data, _ p: WrappedKey.ScryptParameters) throws -> SymmetricKey {
        guard (10...20).contains(p.logN), (1...32).contains(p.r), (1...16).contains(p.p) else {
            throw KeyWrapError.malformed("scrypt parameters out of range (log2 N \(p.logN), r \(p.r), p \(p.p))")
        }
        return try KDF.Scrypt.deriveKey(
            from: Array(passcode.utf8), salt: salt, outputByteCount: 32, rounds: 1 << p.logN, blockSize: p.r, parallelism: p.p)
    }

    private static func seal(_ key: [UInt8], _ kek: SymmetricKey) throws -> Data {
        guard let combined = try AES.GCM.seal(key, using: kek).combined else { throw KeyWrapError.malformed("AES-GCM gave no output") }
        return combined
    }

    private static func open(_ sealed: Data, _ kek: SymmetricKey) throws -> [UInt8] {
        let box: AES.GCM.SealedBox
        do {
            box = try AES.GCM.SealedBox(combined: sealed)
        } catch {
            throw KeyWrapError.malformed("not an AES-GCM sealed box")
        }
        do {
            return Array(try AES.GCM.open(box, using: kek))
        } catch {
            throw KeyWrapError.wrongPasscode  // authentication failed: the tag does not match
        }
    }
}
