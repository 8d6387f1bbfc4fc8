import Crypto
import Foundation
import LockwipeCore
import LockwipeVaultIO
import Testing

@testable import LockwipeDaemon

@Suite struct KeyWrapTests {
    let key = (0..<64).map { UInt8($0 * 3 + 1) }
    /// Small scrypt cost: the arithmetic is the same, the tests stay fast.
    let cheap = WrappedKey.ScryptParameters(logN: 10, r: 8, p: 1)

    @Test func thePasscodeOpensItAndNothingElseDoes() throws {
        let wrapped = try KeyWrap.wrap(key, passcode: "correct horse", machineKey: nil, registration: nil, parameters: cheap)
        #expect(try KeyWrap.unwrap(wrapped, passcode: "correct horse", machineKey: nil, registration: nil) == key)
        #expect(throws: KeyWrapError.wrongPasscode) { try KeyWrap.unwrap(wrapped, passcode: "correct hors", machineKey: nil, registration: nil) }
        #expect(throws: KeyWrapError.wrongPasscode) { try KeyWrap.unwrap(wrapped, passcode: "", machineKey: nil, registration: nil) }
    }

    @Test func theStoredFormHoldsNoKeyBytesAndIsFreshEveryTime() throws {
        let a = try KeyWrap.wrap(key, passcode: "same", machineKey: nil, registration: nil, parameters: cheap)
        let b = try KeyWrap.wrap(key, passcode: "same", machineKey: nil, registration: nil, parameters: cheap)
        #expect(a.salt != b.salt && a.sealed != b.sealed)
        let stored = try JSONEncoder().encode(a)
        #expect(stored.range(of: Data(key[0..<16])) == nil)
        #expect(try JSONDecoder().decode(WrappedKey.self, from: stored) == a)
        #expect(a.scrypt == cheap)
    }

    @Test func aTamperedBlobIsRefusedNotDecryptedWrongly() throws {
        var wrapped = try KeyWrap.wrap(key, passcode: "pin", machineKey: nil, registration: nil, parameters: cheap)
        wrapped.sealed[20] ^= 1
        #expect(throws: KeyWrapError.wrongPasscode) { try KeyWrap.unwrap(wrapped, passcode: "pin", machineKey: nil, registration: nil) }
        wrapped.scrypt = .init(logN: 40, r: 8, p: 1)
        #expect(throws: KeyWrapError.self) { try KeyWrap.unwrap(wrapped, passcode: "pin", machineKey: nil, registration: nil) }
    }

    @Test func theMachineKeyWrapsWhenTheDefaultPasscodeIsAllowed() throws {
        let machine = SymmetricKey(size: .bits256)
        let wrapped = try KeyWrap.wrap(key, machineKey: machine, registration: nil)
        #expect(wrapped.wrapping == .machine && wrapped.scrypt == nil)
        #expect(try KeyWrap.unwrap(wrapped, machineKey: machine, registration: nil) == key)
        #expect(throws: KeyWrapError.wrongPasscode) { try KeyWrap.unwrap(wrapped, machineKey: SymmetricKey(size: .bits256), registration: nil) }
        #expect(throws: KeyWrapError.self) { try KeyWrap.unwrap(wrapped, passcode: "anything", machineKey: nil, registration: nil) }
    }

    @Test func theRegistrationIdIsBoundAsAssociatedData() throws {
        let id = RegistrationID("0123456789abcdef0123456789abcdef")
        let machine = SymmetricKey(size: .bits256)
        let bound = try KeyWrap.wrap(key, passcode: "pin", machineKey: nil, registration: id, parameters: cheap)
        #expect(bound.format == 2 && bound.isBound)
        #expect(try KeyWrap.unwrap(bound, passcode: "pin", machineKey: nil, registration: id) == key)
        // Moved to another registration: the right passcode does not open it there.
        #expect(throws: KeyWrapError.wrongPasscode) { try KeyWrap.unwrap(bound, passcode: "pin", machineKey: nil, registration: RegistrationID("f" + id.rawValue.dropFirst())) }
        #expect(throws: KeyWrapError.self) { try KeyWrap.unwrap(bound, passcode: "pin", machineKey: nil, registration: nil) }
        let byMachine = try KeyWrap.wrap(key, machineKey: machine, registration: id)
        #expect(try KeyWrap.unwrap(byMachine, machineKey: machine, registration: id) == key)
        #expect(throws: KeyWrapError.wrongPasscode) { try KeyWrap.unwrap(byMachine, machineKey: machine, registration: RegistrationID("x")) }
        // Format 1 (no associated data, no format recorded) still opens, whatever id is given.
        let legacy = try KeyWrap.wrap(key, machineKey: machine, registration: nil)
        #expect(legacy.format == nil && !legacy.isBound)
        let decoded = try JSONDecoder().decode(WrappedKey.self, from: Data(#"{"wrapping":"machine","salt":"","sealed":"\#(legacy.sealed.base64EncodedString())"}"#.utf8))
        #expect(try KeyWrap.unwrap(decoded, machineKey: machine, registration: id) == key)
        // An unknown format is refused by name.
        var future = bound
        future.format = 4
        #expect(throws: KeyWrapError.malformed("unknown wrap format 4")) { try KeyWrap.unwrap(future, passcode: "pin", machineKey: nil, registration: id) }
        var machineThree = byMachine
        machineThree.format = 3
        #expect(throws: KeyWrapError.malformed("unknown wrap format 3")) { try KeyWrap.unwrap(machineThree, machineKey: machine, registration: id) }
    }

    /// Issue 43: a passcode wrap of format 3 needs the passcode and the machine key (sealed to
    /// the TPM2): a copy of the key file cannot be guessed at without this machine.
    @Test func aPasscodeWrapOfFormat3NeedsThePasscodeAndTheMachineKey() throws {
        let key = [UInt8](repeating: 9, count: 64)
        let machine = SymmetricKey(size: .bits256)
        let id = RegistrationID("0123456789abcdef0123456789abcdef")
        let wrapped = try KeyWrap.wrap(key, passcode: "pin", machineKey: machine, registration: id, parameters: cheap)
        #expect(wrapped.format == 3 && wrapped.needsMachineKey && !wrapped.isOutdated)
        #expect(try KeyWrap.unwrap(wrapped, passcode: "pin", machineKey: machine, registration: id) == key)
        #expect(throws: KeyWrapError.needsMachineKey) { try KeyWrap.unwrap(wrapped, passcode: "pin", machineKey: nil, registration: id) }
        #expect(throws: KeyWrapError.wrongPasscode) { try KeyWrap.unwrap(wrapped, passcode: "pin", machineKey: SymmetricKey(size: .bits256), registration: id) }
        #expect(throws: KeyWrapError.wrongPasscode) { try KeyWrap.unwrap(wrapped, passcode: "pim", machineKey: machine, registration: id) }
        // The passcode alone, as format 2 would take it, does not open it either.
        var asTwo = wrapped
        asTwo.format = 2
        #expect(throws: KeyWrapError.wrongPasscode) { try KeyWrap.unwrap(asTwo, passcode: "pin", machineKey: nil, registration: id) }
        // A format-2 passcode wrap still opens with the passcode alone, and is outdated.
        let two = try KeyWrap.wrap(key, passcode: "pin", machineKey: nil, registration: id, parameters: cheap)
        #expect(two.format == 2 && !two.needsMachineKey && two.isOutdated)
        #expect(try KeyWrap.unwrap(two, passcode: "pin", machineKey: nil, registration: id) == key)
        #expect(!(try KeyWrap.wrap(key, machineKey: machine, registration: id)).isOutdated)
    }
}
