import LockwipeProtocol

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

/// Shell completion of user arguments: the registrations lockwiped shows the caller
/// (`status`), at the socket the words name (`--socket`) or the default one. Quiet and
/// quick when the daemon cannot be reached: no candidates, no message, at most 2 s.
@Sendable func completeUsers(_ words: [String], _ index: Int, _ prefix: String) -> [String] {
    var socket = ProcessInfo.processInfo.environment["LOCKWIPE_SOCKET"].flatMap { $0.isEmpty ? nil : $0 } ?? VarlinkClient.defaultSocketPath
    for (i, w) in words.enumerated() {
        if w == "--socket", i + 1 < words.count { socket = words[i + 1] }
        if w.hasPrefix("--socket=") { socket = String(w.dropFirst("--socket=".count)) }
    }
    guard let client = try? VarlinkClient(path: socket, timeout: 2),
        let report = try? client.call(.getStatus, StatusRequest())
    else { return [] }
    return report.registrations.map(\.user).filter { $0.hasPrefix(prefix) }
}

/// Completion of `register`'s user: the accounts in the passwd database (getpwent).
@Sendable func completeSystemUsers(_ words: [String], _ index: Int, _ prefix: String) -> [String] {
    var names: [String] = []
    setpwent()
    while let p = getpwent() { names.append(String(cString: p.pointee.pw_name)) }
    endpwent()
    return names.filter { $0.hasPrefix(prefix) }.sorted()
}
