import Crypto
import Foundation
@testable import LockwipeDaemon
import Testing

@Suite struct KeyWrapTests {
    let key = (0..<64).map { UInt8($0 * 3 + 1) }
    /// Small scrypt cost: the arithmetic is the same, the tests stay fast.
    let cheap = WrappedKey.ScryptParameters(logN: 10, r: 8, p: 1)

    @Test func thePasscodeOpensItAndNothingElseDoes() throws {
        let wrapped = try KeyWrap.wrap(key, passcode: "correct horse", parameters: cheap)
        #expect(try KeyWrap.unwrap(wrapped, passcode: "correct horse") == key)
        #expect(throws: KeyWrapError.wrongPasscode) { try KeyWrap.unwrap(wrapped, passcode: "correct hors") }
        #expect(throws: KeyWrapError.wrongPasscode) { try KeyWrap.unwrap(wrapped, passcode: "") }
    }

    @Test func theStoredFormHoldsNoKeyBytesAndIsFreshEveryTime() throws {
        let a = try KeyWrap.wrap(key, passcode: "same", parameters: cheap)
        let b = try KeyWrap.wrap(key, passcode: "same", parameters: cheap)
        #expect(a.salt != b.salt && a.sealed != b.sealed)
        let stored = try JSONEncoder().encode(a)
        #expect(stored.range(of: Data(key[0..<16])) == nil)
        #expect(try JSONDecoder().decode(WrappedKey.self, from: stored) == a)
        #expect(a.scrypt == cheap)
    }

    @Test func aTamperedBlobIsRefusedNotDecryptedWrongly() throws {
        var wrapped = try KeyWrap.wrap(key, passcode: "pin", parameters: cheap)
        wrapped.sealed[20] ^= 1
        #expect(throws: KeyWrapError.wrongPasscode) { try KeyWrap.unwrap(wrapped, passcode: "pin") }
        wrapped.scrypt = .init(logN: 40, r: 8, p: 1)
        #expect(throws: KeyWrapError.self) { try KeyWrap.unwrap(wrapped, passcode: "pin") }
    }

    @Test func theMachineKeyWrapsWhenTheDefaultPasscodeIsAllowed() throws {
        let machine = SymmetricKey(size: .bits256)
        let wrapped = try KeyWrap.wrap(key, machineKey: machine)
        #expect(wrapped.wrapping == .machine && wrapped.scrypt == nil)
        #expect(try KeyWrap.unwrap(wrapped, machineKey: machine) == key)
        #expect(throws: KeyWrapError.wrongPasscode) { try KeyWrap.unwrap(wrapped, machineKey: SymmetricKey(size: .bits256)) }
        #expect(throws: KeyWrapError.self) { try KeyWrap.unwrap(wrapped, passcode: "anything") }
    }
}
