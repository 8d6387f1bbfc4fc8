import Crypto
import CryptoExtras
import Foundation

/// The bytes a wipe writes over file data: zeros, or a ChaCha20 keystream under a fresh
/// random key (one per wipe), produced a chunk at a time in user space. That is one
/// BoringSSL call per MiB instead of one `getrandom` per block, which here runs at
/// ~0.3 GiB/s and would make the CSPRNG, not the disk, the limit.
struct OverwriteSource {
    let pattern: WipeOptions.Pattern
    let chunkSize: Int
    private let zeros: Data
    private let key = SymmetricKey(size: .bits256)
    /// Each chunk uses its own nonce (a counter), so no keystream is ever repeated.
    private var chunkCounter: UInt64 = 0

    init(pattern: WipeOptions.Pattern, chunkSize: Int = 1 << 20) {
        self.pattern = pattern
        self.chunkSize = chunkSize
        self.zeros = Data(count: chunkSize)
    }

    /// Calls `body` with the next chunk (`chunkSize` bytes).
    mutating func withNextChunk<T>(_ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        switch pattern {
        case .zeros:
            return try zeros.withUnsafeBytes(body)
        case .random:
            chunkCounter += 1
            var nonceBytes = [UInt8](repeating: 0, count: 12)
            withUnsafeBytes(of: chunkCounter.littleEndian) { nonceBytes.replaceSubrange(0..<8, with: $0) }
            // The nonce is well-formed by construction and the key is 256 bits, so this
            // cannot fail; zeros would still overwrite if it ever did.
            guard let nonce = try? Insecure.ChaCha20CTR.Nonce(data: nonceBytes),
                  let stream = try? Insecure.ChaCha20CTR.encrypt(zeros, using: key, nonce: nonce)
            else { return try zeros.withUnsafeBytes(body) }
            return try stream.withUnsafeBytes(body)
        }
    }
}
