import Crypto
import CryptoExtras
import Foundation

/// The bytes a wipe writes over file data: zeros, or an AES-256-CTR keystream under a
/// fresh random key (one per source: each writer thread of a wipe has its own), produced
/// a MiB at a time in user space and handed out in the lengths the writes need, every
/// byte used once. That is one BoringSSL call per
/// MiB instead of one `getrandom` per block, which here runs at ~0.3 GiB/s and would make
/// the CSPRNG, not the disk, the limit. AES-CTR rather than ChaCha20: with the AES
/// instructions every x86-64 and arm64 server has, BoringSSL's CTR mode is several times
/// faster than its ChaCha20 (which took a third of an overwrite's CPU time in
/// `perf`, docs/benchmarks.md); both are keystreams no one can predict without the key,
/// which is all an overwrite pattern needs.
struct OverwriteSource {
    let pattern: WipeOptions.Pattern
    let chunkSize: Int
    private let zeros: Data
    private let key = SymmetricKey(size: .bits256)
    /// Each keystream chunk uses its own nonce (a counter), so no counter block is ever repeated.
    private var chunkCounter: UInt64 = 0
    private var stream = Data()
    private var used = 0

    init(pattern: WipeOptions.Pattern, chunkSize: Int = 1 << 20) {
        self.pattern = pattern
        self.chunkSize = chunkSize
        self.zeros = Data(count: chunkSize)
    }

    /// Calls `body` with the next `min(length, chunkSize)` bytes of the pattern (fewer
    /// only when the current keystream chunk runs out).
    mutating func withNext<T>(_ length: Int, _ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        let wanted = min(length, chunkSize)
        switch pattern {
        case .zeros:
            return try zeros.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[0..<wanted])) }
        case .random:
            if used == stream.count { refill() }
            let n = min(wanted, stream.count - used)
            defer { used += n }
            return try stream.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[used..<(used + n)])) }
        }
    }

    private mutating func refill() {
        chunkCounter += 1
        var nonceBytes = [UInt8](repeating: 0, count: 12)
        withUnsafeBytes(of: chunkCounter.littleEndian) { nonceBytes.replaceSubrange(0..<8, with: $0) }
        do {
            // 96 bits of nonce and a 32-bit block counter from 0: a chunk of up to 64 GiB.
            let nonce = try AES._CTR.Nonce(nonceBytes: nonceBytes)
            stream = try AES._CTR.encrypt(zeros, using: key, nonce: nonce)
        } catch {
            // A 12-byte nonce and a 256-bit key are valid by construction.
            preconditionFailure("AES-CTR refused a valid key and nonce: \(error)")
        }
        used = 0
    }
}
