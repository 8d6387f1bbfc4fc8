import Crypto
import Foundation
import LockwipeBase

/// The machine key: SAP's "default data-vault passcode". Where the passcode policy allows
/// it and a user has not set a passcode of their own, the vault key is wrapped by this key
/// instead; a passcode wrap (format 3) needs it too. 32 random bytes, made once and kept
/// sealed with systemd's credentials (`SealedSecret` in the daemon: `machine.key.cred`), or
/// as the plain file `machine.key` where `[keys] seal` does not seal.
public enum MachineKey {
    public static let fileName = "machine.key"
    package static let size = 32
}

/// Random bytes for keys: `SystemRandomNumberGenerator` is the kernel's CSPRNG
/// (getrandom(2) on Linux).
package enum SecRandom {
    package static func fill(_ bytes: inout [UInt8]) -> Bool {
        var generator = SystemRandomNumberGenerator()
        for i in bytes.indices { bytes[i] = generator.next() }
        return true
    }

    package static func key(_ count: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        _ = fill(&bytes)
        return bytes
    }
}

/// Overwrites key material in place (best effort in Swift: copies made by the runtime
/// before this point are out of reach).
package func zeroSecurely(_ buffer: UnsafeMutableRawBufferPointer) {
    guard let base = buffer.baseAddress, buffer.count > 0 else { return }
    explicit_bzero(base, buffer.count)
}

extension Array where Element == UInt8 {
    /// Zeroes the bytes (key material) in place.
    package mutating func wipe() { withUnsafeMutableBytes { zeroSecurely($0) } }
}
