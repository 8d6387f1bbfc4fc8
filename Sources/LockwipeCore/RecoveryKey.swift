import Crypto

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A vault key sealed to the organisation's recovery key (`[keys] recovery_public_key`),
/// stored in the vault's key file beside the wrap that opens it day to day
/// (`WrappedKey.recovery`). Only the organisation's private key, which never comes to the
/// machine but for `lockwipectl recover`, opens it: it survives a cleared TPM, a new board
/// or a firmware update that changes the PCRs the machine key is sealed to.
public struct RecoveryWrap: Codable, Sendable, Equatable {
    /// The recovery key it is sealed to (`RecoveryPublicKey.identifier`).
    public var recipient: String
    /// HPKE's encapsulated key (the sender's ephemeral X25519 public key).
    public var encapsulated: Data
    /// The vault key, sealed (ChaCha20-Poly1305 ciphertext ‖ tag).
    public var sealed: Data

    public init(recipient: String, encapsulated: Data, sealed: Data) {
        self.recipient = recipient
        self.encapsulated = encapsulated
        self.sealed = sealed
    }
}

/// The organisation's recovery public key: an X25519 key, given as 32 bytes in base64.
public struct RecoveryPublicKey: Sendable, Equatable {
    public let key: Curve25519.KeyAgreement.PublicKey
    /// "lwr-" and the first 8 bytes of the SHA-256 of the key, in hex: names the key in
    /// status, in each wrap and in what `lockwipectl recover` reports, without the key.
    public let identifier: String

    public init(_ key: Curve25519.KeyAgreement.PublicKey) {
        self.key = key
        identifier = "lwr-" + SHA256.hash(data: key.rawRepresentation).prefix(8).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// Parses the base64 of a raw X25519 public key; the error says what is wrong in words.
    public init(base64 text: String) throws(RecoveryKeyError) {
        guard let raw = Data(base64Encoded: text.trimmingWhitespace()) else {
            throw RecoveryKeyError("is not base64 (it is the line lockwipectl recovery-key new prints)")
        }
        guard raw.count == 32 else { throw RecoveryKeyError("is \(raw.count) bytes, not the 32 bytes of an X25519 public key") }
        do {
            self.init(try Curve25519.KeyAgreement.PublicKey(rawRepresentation: raw))
        } catch {
            throw RecoveryKeyError("is not an X25519 public key")
        }
    }

    public var base64: String { key.rawRepresentation.base64EncodedString() }

    public static func == (a: Self, b: Self) -> Bool { a.key.rawRepresentation == b.key.rawRepresentation }
}

public struct RecoveryKeyError: Error, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Sealing a vault key to the recovery key, and opening it with the private key.
///
/// HPKE (RFC 9180) in base mode with DHKEM(X25519, HKDF-SHA256), HKDF-SHA256 and
/// ChaCha20-Poly1305 (swift-crypto's `Curve25519_SHA256_ChachaPoly`); info
/// "lockwipe recovery\0"; the associated data is the registration binding of every vault
/// key wrap (`binding`: "lockwipe vault key\0" ‖ registration id), so that a recovery
/// wrap moved to another registration does not open there. Pure but for HPKE's ephemeral
/// key, which swift-crypto draws from the system's random source.
public enum RecoveryKey {
    static let ciphersuite = HPKE.Ciphersuite.Curve25519_SHA256_ChachaPoly
    static let info = Data("lockwipe recovery".utf8) + Data([0])
    /// The first line of a private key file (`lockwipectl recovery-key new`).
    public static let fileHeader = "lockwipe recovery private key v1"

    /// What every wrap of a vault key is bound to: "lockwipe vault key\0" ‖ the
    /// registration id (AES-GCM's associated data in `KeyWrap`, HPKE's here).
    public static func binding(_ registration: RegistrationID) -> Data {
        Data("lockwipe vault key".utf8) + Data([0]) + Data(registration.rawValue.utf8)
    }

    public static func wrap(_ key: [UInt8], to recipient: RecoveryPublicKey, registration: RegistrationID) throws -> RecoveryWrap {
        var sender = try HPKE.Sender(recipientKey: recipient.key, ciphersuite: ciphersuite, info: info)
        let sealed = try sender.seal(key, authenticating: binding(registration))
        return RecoveryWrap(recipient: recipient.identifier, encapsulated: sender.encapsulatedKey, sealed: sealed)
    }

    /// Opens `wrap` with the organisation's private key. Throws `RecoveryKeyError` in words
    /// when the key is another one or the wrap was made for another registration.
    public static func unwrap(_ wrap: RecoveryWrap, privateKey: Curve25519.KeyAgreement.PrivateKey, registration: RegistrationID) throws(RecoveryKeyError) -> [UInt8] {
        let mine = RecoveryPublicKey(privateKey.publicKey).identifier
        guard wrap.recipient == mine else {
            throw RecoveryKeyError("it is sealed to the recovery key \(wrap.recipient), and this private key is \(mine)")
        }
        do {
            var recipient = try HPKE.Recipient(privateKey: privateKey, ciphersuite: ciphersuite, info: info, encapsulatedKey: wrap.encapsulated)
            return Array(try recipient.open(wrap.sealed, authenticating: binding(registration)))
        } catch {
            throw RecoveryKeyError("it does not open with this private key for registration \(registration) (damaged, or made for another registration)")
        }
    }

    /// A private key file's text: the header line, then the raw key in base64.
    public static func fileText(_ key: Curve25519.KeyAgreement.PrivateKey) -> String {
        fileHeader + "\n" + key.rawRepresentation.base64EncodedString() + "\n"
    }

    /// Reads a private key file's text (`fileText`).
    public static func privateKey(fileText text: String) throws(RecoveryKeyError) -> Curve25519.KeyAgreement.PrivateKey {
        let lines = text.split(whereSeparator: \.isNewline).map { String($0).trimmingWhitespace() }.filter { !$0.isEmpty }
        guard lines.count == 2, lines[0] == fileHeader else {
            throw RecoveryKeyError("is not a recovery private key file (its first line must be '\(fileHeader)', then one line of base64)")
        }
        guard var raw = Data(base64Encoded: lines[1]), raw.count == 32 else {
            throw RecoveryKeyError("does not hold a 32-byte key in base64 on its second line")
        }
        defer { raw.resetBytes(in: 0..<raw.count) }
        do {
            return try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: raw)
        } catch {
            throw RecoveryKeyError("does not hold an X25519 private key")
        }
    }
}
