#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Standard error and standard input without `FileHandle`, which is full Foundation's
/// (and with it ICU's data): `lockwipectl` links FoundationEssentials only.
enum StandardStreams {
    /// Writes all of `text` to standard error (retrying short writes and EINTR).
    static func writeError(_ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                return
            }
            bytes = bytes.dropFirst(n)
        }
    }

    /// Everything on standard input up to end of file; nil on a read error.
    static func readInputToEnd() -> Data? {
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
            if n == 0 { return data }
            if n < 0 {
                if errno == EINTR { continue }
                return nil
            }
            data.append(contentsOf: chunk[..<n])
        }
    }
}

/// Ends the process with `code`, flushing standard output (C's `exit`; inside a
/// `ParsableCommand` the name `exit` is ArgumentParser's own method).
func exitProcess(_ code: Int32) -> Never {
    Pager.finish()
    #if canImport(Glibc)
        Glibc.exit(code)
    #elseif canImport(Musl)
        Musl.exit(code)
    #else
        Darwin.exit(code)
    #endif
}
