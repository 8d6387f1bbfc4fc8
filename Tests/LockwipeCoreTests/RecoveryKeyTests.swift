import Crypto
import LockwipeCore
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The organisation's recovery key: a vault key sealed to it opens with its private key,
/// for the registration it was sealed for, and with nothing else.
@Suite struct RecoveryKeyTests {
    let vaultKey = (0..<64).map { UInt8($0 * 3 & 0xFF) }

    @Test func aWrapOpensWithThePrivateKeyForItsRegistrationOnly() throws {
        let organisation = Curve25519.KeyAgreement.PrivateKey()
        let recipient = RecoveryPublicKey(organisation.publicKey)
        let wrap = try RecoveryKey.wrap(vaultKey, to: recipient, registration: RegistrationID("reg-1"))
        #expect(wrap.recipient == recipient.identifier)
        #expect(!wrap.sealed.contains(Data(vaultKey.prefix(16))))
        #expect(try RecoveryKey.unwrap(wrap, privateKey: organisation, registration: RegistrationID("reg-1")) == vaultKey)
        // Moved to another registration, it does not open.
        #expect(throws: RecoveryKeyError.self) { try RecoveryKey.unwrap(wrap, privateKey: organisation, registration: RegistrationID("reg-2")) }
        // Two wraps of one key differ (a fresh ephemeral key each time).
        #expect(try RecoveryKey.wrap(vaultKey, to: recipient, registration: RegistrationID("reg-1")).encapsulated != wrap.encapsulated)
    }

    @Test func anotherPrivateKeyIsNamedAndOpensNothing() throws {
        let organisation = Curve25519.KeyAgreement.PrivateKey()
        let other = Curve25519.KeyAgreement.PrivateKey()
        let wrap = try RecoveryKey.wrap(vaultKey, to: RecoveryPublicKey(organisation.publicKey), registration: RegistrationID("r"))
        #expect(throws: RecoveryKeyError("it is sealed to the recovery key \(wrap.recipient), and this private key is \(RecoveryPublicKey(other.publicKey).identifier)")) {
            try RecoveryKey.unwrap(wrap, privateKey: other, registration: RegistrationID("r"))
        }
        // The identifier is named, but a tampered one does not help: the key must match.
        var forged = wrap
        forged.recipient = RecoveryPublicKey(other.publicKey).identifier
        #expect(throws: RecoveryKeyError.self) { try RecoveryKey.unwrap(forged, privateKey: other, registration: RegistrationID("r")) }
    }

    @Test func thePrivateKeyFileReadsBackAndBadFilesAreNamed() throws {
        let key = Curve25519.KeyAgreement.PrivateKey()
        let text = RecoveryKey.fileText(key)
        #expect(text.hasPrefix(RecoveryKey.fileHeader + "\n"))
        #expect(try RecoveryKey.privateKey(fileText: text).rawRepresentation == key.rawRepresentation)
        #expect(try RecoveryKey.privateKey(fileText: "\n" + text.replacingOccurrences(of: "\n", with: "\r\n") + "\n").rawRepresentation == key.rawRepresentation)
        let cases: [(String, String)] = [
            ("", "is not a recovery private key file (its first line must be '\(RecoveryKey.fileHeader)', then one line of base64)"),
            ("ssh-ed25519 AAAA\n", "is not a recovery private key file (its first line must be '\(RecoveryKey.fileHeader)', then one line of base64)"),
            (RecoveryKey.fileHeader + "\nnot base64!\n", "does not hold a 32-byte key in base64 on its second line"),
            (RecoveryKey.fileHeader + "\nAAAA\n", "does not hold a 32-byte key in base64 on its second line"),
        ]
        for (text, message) in cases {
            #expect(throws: RecoveryKeyError(message), "\(text)") { try RecoveryKey.privateKey(fileText: text) }
        }
    }

    @Test func thePublicKeyReadsFromItsBase64AndNamesWhatIsWrong() throws {
        let key = RecoveryPublicKey(Curve25519.KeyAgreement.PrivateKey().publicKey)
        #expect(try RecoveryPublicKey(base64: key.base64) == key)
        #expect(try RecoveryPublicKey(base64: " " + key.base64 + " ").identifier == key.identifier)
        #expect(key.identifier.hasPrefix("lwr-") && key.identifier.count == 20)
        #expect(throws: RecoveryKeyError("is not base64 (it is the line lockwipectl recovery-key new prints)")) { try RecoveryPublicKey(base64: "lwr-00") }
        #expect(throws: RecoveryKeyError("is 3 bytes, not the 32 bytes of an X25519 public key")) { try RecoveryPublicKey(base64: "AAAA") }
    }

    @Test func theBindingIsTheOneEveryVaultKeyWrapUses() {
        #expect(RecoveryKey.binding(RegistrationID("ab")) == Data("lockwipe vault key".utf8) + Data([0]) + Data("ab".utf8))
    }
}
