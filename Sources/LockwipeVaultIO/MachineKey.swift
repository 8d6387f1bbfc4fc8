import Crypto
import Foundation
import LockwipeBase

/// The machine key: SAP's "default data-vault passcode". Where the passcode policy allows
/// it and a user has not set a passcode of their own, the vault key is wrapped by this key
/// instead. 32 random bytes in `machine.key` in the state directory (0600 in the 0700
/// state directory), created once, atomically: written to a temporary file, made durable,
/// then `link(2)`ed to its name, which fails when another process got there first — so
/// two starts can never wrap keys under two different machine keys.
///
/// It protects against a casual reader of the disk no better than the state directory is
/// protected; a user passcode is what protects against root and disk thieves.
public enum MachineKey {
    public static let fileName = "machine.key"
    package static let size = 32

    public static func loadOrCreate(stateDirectory: String) throws -> SymmetricKey {
        let path = stateDirectory + "/" + fileName
        if let key = try load(path) { return key }
        var bytes = [UInt8](repeating: 0, count: size)
        defer { bytes.withUnsafeMutableBytes { zeroSecurely($0) } }
        guard SecRandom.fill(&bytes) else { throw FileSystemError("read random bytes for", path, code: EIO) }
        let temporary = path + ".new-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw FileSystemError("create", temporary) }
        defer { unlink(temporary) }
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, size) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == size, synced else { throw FileSystemError("write", temporary) }
        if link(temporary, path) != 0, errno != EEXIST { throw FileSystemError("create", path) }
        let dir = open(stateDirectory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 {
            fsync(dir)
            close(dir)
        }
        guard let key = try load(path) else { throw FileSystemError("read", path, code: ENOENT) }
        return key
    }

    private static func load(_ path: String) throws -> SymmetricKey? {
        guard var bytes = try SecretFile.read(path, size: size) else { return nil }
        defer { bytes.withUnsafeMutableBytes { zeroSecurely($0) } }
        return SymmetricKey(data: bytes)
    }
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
