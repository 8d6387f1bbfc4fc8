import Foundation

/// Reads a file of `/proc` whole. The kernel reports a size of 0 for them and hands out
/// their text in pieces; Foundation's `String(contentsOfFile:)` stops after the first
/// 4 KiB, which cut the mount table of a service's namespace before the mount on a vault.
package enum ProcFile {
    /// The whole text of `path`, read with `read(2)` until the end; nil when it cannot be
    /// opened or read.
    package static func read(_ path: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: 16_384)
        guard let length = read(path, into: &buffer) else { return nil }
        return String(decoding: buffer[0..<length], as: UTF8.self)
    }

    /// Reads `path` whole into `buffer`, from its start, growing it when the file is longer
    /// (so that one buffer serves many reads); the number of bytes read, or nil when it
    /// cannot be opened or read.
    package static func read(_ path: String, into buffer: inout [UInt8]) -> Int? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        if buffer.isEmpty { buffer = [UInt8](repeating: 0, count: 4096) }
        var length = 0
        while true {
            if length == buffer.count { buffer.append(contentsOf: repeatElement(0, count: buffer.count)) }
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + length, $0.count - length) }
            if n == 0 { return length }
            if n < 0 {
                if errno == EINTR { continue }
                return nil
            }
            length += n
        }
    }
}
