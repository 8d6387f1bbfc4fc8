import CLockwipeFS
import Foundation

/// Writes the wipe's pattern over one file's data at a time, for one thread (it is not
/// shared): its own pattern source (its own keystream key) and its own page-aligned
/// buffer, since `O_DIRECT` needs aligned memory.
///
/// Each file is written with `O_DIRECT` where its file system takes it (`fcntl`
/// `F_SETFL`): the data goes from the buffer to the device, with neither a copy into
/// the page cache nor writeback to start and wait for. Where `O_DIRECT` is refused, at
/// the `fcntl` or at a write (`EINVAL`: an unaligned range, a file system without it),
/// the file is written through the page cache as before, and its writeback started.
/// Either way the batch's flush (`WipeRun.finalize`) is what makes the writes durable.
final class PatternWriter {
    private let source: OverwriteSource
    private let buffer: UnsafeMutableRawBufferPointer
    let progress: WipeProgress
    /// Whether `O_DIRECT` is tried at all (tests turn it off to cover the buffered path).
    let direct: Bool
    /// Writes made with `O_DIRECT` and through the page cache, for the tests.
    private(set) var directWrites = 0
    private(set) var bufferedWrites = 0

    static let alignment = 4096

    init(pattern: WipeOptions.Pattern, progress: WipeProgress, direct: Bool = true, chunkSize: Int = 1 << 20) {
        source = OverwriteSource(pattern: pattern)
        buffer = .allocate(byteCount: chunkSize, alignment: Self.alignment)
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        self.progress = progress
        self.direct = direct
    }

    deinit { buffer.deallocate() }

    /// Writes `passes` passes over the file; every pass but the last is made durable
    /// (else a cache, the page cache or the device's, may keep only the last one).
    /// Returns the file's own bytes written, over all passes.
    func overwrite(_ fd: Int32, size: Int64, granule: Int64, passes: Int) -> Result<Int64, WriteError> {
        var direct = self.direct && Self.setDirect(fd, true)
        var written: Int64 = 0
        for pass in 0..<passes {
            switch writeData(fd, size: size, granule: granule, direct: &direct) {
            case .success(let bytes): written += bytes
            case .failure(let error): return .failure(error)
            }
            if pass < passes - 1, fdatasync(fd) != 0 { return .failure(WriteError(code: errno, passNotDurable: true)) }
        }
        // Whatever went through the page cache starts for the disk now; a file written
        // with O_DIRECT throughout has nothing to start, and costs no call.
        if !direct { _ = lockwipe_start_writeback(fd) }
        return .success(written)
    }

    struct WriteError: Error, Equatable {
        var code: Int32
        /// The failure was the flush between two passes, not a write.
        var passNotDurable = false
    }

    /// Writes the pattern over every data range of the file (`SEEK_DATA`/`SEEK_HOLE`), so a
    /// sparse file is not inflated. Large chunks, positioned writes: no per-block calls.
    ///
    /// The range that ends at the end of the file is written on to the end of its last
    /// block (`granule`): a write that covers only part of a block not in the page cache
    /// makes the kernel read that block from the disk first, one synchronous read per file
    /// (with 10,000 files of 100 KiB, more than half of the overwrite's time). The block is
    /// the file's already, so nothing is allocated; only the size grows, by less than a
    /// block, and the file is truncated and unlinked once the batch is durable. Returns
    /// the file's own bytes overwritten, not the slack past its end.
    private func writeData(_ fd: Int32, size: Int64, granule: Int64, direct: inout Bool) -> Result<Int64, WriteError> {
        var offset: Int64 = 0
        var written: Int64 = 0
        while offset < size {
            var data = lseek(fd, off_t(offset), SEEK_DATA)
            var hole: off_t
            if data < 0 {
                if errno == ENXIO { break }  // only a hole is left
                data = off_t(offset)
                hole = off_t(size)
            } else {
                hole = lseek(fd, data, SEEK_HOLE)
                if hole < 0 { hole = off_t(size) }
            }
            let to = min(Int64(hole), size)
            let end = to == size ? (size + granule - 1) / granule * granule : to
            var position = Int64(data)
            while position < end {
                if progress.isCancelled { return .failure(WriteError(code: ECANCELED)) }
                let length = Int(min(Int64(buffer.count), end - position))
                source.fill(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<length]))
                let n = pwrite(fd, buffer.baseAddress, length, off_t(position))
                if n < 0 {
                    let code = errno
                    if code == EINTR { continue }
                    if code == EINVAL && direct {
                        // Refused for this range (alignment, or the file system): the
                        // rest of the file goes through the page cache, the buffer's
                        // pattern renewed for it.
                        direct = false
                        _ = Self.setDirect(fd, false)
                        continue
                    }
                    return .failure(WriteError(code: code))
                }
                if direct { directWrites += 1 } else { bufferedWrites += 1 }
                let own = max(0, min(position + Int64(n), size) - position)
                position += Int64(n)
                written += own
                progress.wrote(bytes: own)
            }
            offset = max(Int64(hole), offset + 1)
        }
        return .success(written)
    }

    /// Sets or clears `O_DIRECT` on `fd`; false when the file system refuses it.
    static func setDirect(_ fd: Int32, _ on: Bool) -> Bool {
        let flags = fcntl(fd, F_GETFL)
        guard flags >= 0 else { return false }
        return fcntl(fd, F_SETFL, on ? flags | O_DIRECT : flags & ~O_DIRECT) == 0
    }
}
