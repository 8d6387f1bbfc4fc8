import Foundation

/// Reads a file of `/proc` whole. The kernel reports a size of 0 for them and hands out
/// their text in pieces; Foundation's `String(contentsOfFile:)` stops after the first
/// 4 KiB, which cut the mount table of a service's namespace before the mount on a vault.
package enum ProcFile {
    /// The whole text of `path`, read with `read(2)` until the end; nil when it cannot be
    /// opened or read.
    package static func read(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n == 0 { break }
            if n < 0 {
                if errno == EINTR { continue }
                return nil
            }
            bytes.append(contentsOf: chunk[0..<n])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
