import CLibcrypto
import Crypto
import Foundation

/// The bytes a wipe writes over file data: zeros, or an AES-256-CTR keystream under a
/// fresh random key (one per source: each writer thread of a wipe has its own).
///
/// The keystream is generated straight into the writer's buffer, the one `O_DIRECT`
/// writes from: OpenSSL's `EVP_EncryptUpdate` encrypts the buffer in place, so it holds
/// what it held XOR the next keystream bytes. Every keystream byte is used once (the
/// counter runs on over the source's life), so what is written is as unpredictable as the
/// keystream itself, and the very first fill of a zeroed buffer is the keystream. No other
/// memory is touched: swift-crypto's `AES._CTR` returns a new zero-filled `Data` for each
/// call, which then had to be copied into the aligned buffer; that allocation, fill and
/// copy cost as much CPU as the AES itself (docs/benchmarks.md).
///
/// Why a keystream at all: one library call per MiB instead of one `getrandom` per block,
/// which here runs at ~0.3 GiB/s and would make the CSPRNG, not the disk, the limit. AES
/// rather than ChaCha20: with the AES instructions every x86-64 and arm64 server has, CTR
/// mode is several times faster. Both are keystreams no one can predict without the key,
/// which is all an overwrite pattern needs.
final class OverwriteSource {
    let pattern: WipeOptions.Pattern
    /// OpenSSL's cipher context (AES-256-CTR, counter from 0); nil for zeros.
    private let context: OpaquePointer?

    /// `key` is for the tests (a known-answer check); a wipe always takes a fresh one.
    init(pattern: WipeOptions.Pattern, key: SymmetricKey = SymmetricKey(size: .bits256)) {
        self.pattern = pattern
        guard pattern == .random else {
            context = nil
            return
        }
        precondition(key.bitCount == 256, "AES-256 needs a 256-bit key")
        let context = EVP_CIPHER_CTX_new()
        let iv = [UInt8](repeating: 0, count: 16)  // a new key per source: the counter may start at 0
        let initialized = key.withUnsafeBytes { key in
            EVP_EncryptInit_ex(context, EVP_aes_256_ctr(), nil, key.bindMemory(to: UInt8.self).baseAddress, iv)
        }
        // Fails only without memory or with a libcrypto that lacks AES-CTR.
        precondition(context != nil && initialized == 1, "OpenSSL could not set up AES-256-CTR")
        self.context = context
    }

    deinit { EVP_CIPHER_CTX_free(context) }

    /// Makes `buffer` the pattern's next bytes: for zeros it is left as it is (the
    /// writer's buffer holds zeros from the start and nothing else writes to it); for the
    /// keystream it is encrypted in place.
    func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let context, let base = buffer.baseAddress else { return }
        let bytes = base.assumingMemoryBound(to: UInt8.self)
        var offset = 0
        while offset < buffer.count {
            // EVP_EncryptUpdate takes an int length.
            let length = min(buffer.count - offset, 1 << 30)
            var out: Int32 = 0
            let done = EVP_EncryptUpdate(context, bytes + offset, &out, bytes + offset, Int32(length))
            // CTR mode is a stream: all of it, at once, or nothing (which cannot happen
            // with a valid context).
            precondition(done == 1 && out == Int32(length), "OpenSSL's AES-CTR failed")
            offset += length
        }
    }
}
