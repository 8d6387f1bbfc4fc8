#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Files the user names on the command line (`--token-file` and its kin), read with a
/// message in her words when they cannot be: which file, and what is wrong with it.
enum UserFile {
    /// At most `limit` + 1 bytes of `path` (enough to tell that it is too large).
    static func contents(_ path: String, what: String, limit: Int = 32_768) throws -> Data {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else { throw failure(path, what: what, errno) }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw failure(path, what: what, errno) }
        if (st.st_mode & S_IFMT) == S_IFDIR {
            throw CommandFailure(code: ExitStatus.usage, message: "the \(what) file \(path) is a directory; name the file in it")
        }
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while data.count <= limit {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n == 0 { break }
            if n < 0 {
                if errno == EINTR { continue }
                throw failure(path, what: what, errno)
            }
            data.append(contentsOf: chunk[..<n])
        }
        return data
    }

    static func readStandardInput(what: String) throws -> Data {
        guard let data = StandardStreams.readInputToEnd() else {
            throw CommandFailure(code: ExitStatus.failed, message: "cannot read the \(what) from standard input")
        }
        return data
    }

    private static func failure(_ path: String, what: String, _ code: Int32) -> CommandFailure {
        let why: String
        switch code {
        case ENOENT: why = "it does not exist"
        case EACCES, EPERM: why = "you may not read it (run lockwipectl as a user who may, or change its mode)"
        case ENOTDIR: why = "a part of its path is not a directory"
        case EISDIR: why = "it is a directory; name the file in it"
        case ELOOP: why = "its path has too many symbolic links"
        default: why = "the system refused to read it (\(String(cString: strerror(code))))"
        }
        return CommandFailure(code: code == ENOENT || code == EISDIR ? ExitStatus.usage : ExitStatus.failed, message: "cannot read the \(what) file \(path): \(why)")
    }
}
