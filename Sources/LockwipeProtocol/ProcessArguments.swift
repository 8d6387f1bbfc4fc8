#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The process's arguments without the program name.
///
/// Under an `LD_PRELOAD` library such as libfaketime (which the black-box tests use to move
/// time), the Swift runtime can miss argc/argv and `CommandLine.arguments` comes back
/// empty; the kernel's copy in /proc/self/cmdline is then the truth.
public enum ProcessArguments {
    public static func current() -> [String] {
        if !CommandLine.arguments.isEmpty { return Array(CommandLine.arguments.dropFirst()) }
        guard let data = FileManager.default.contents(atPath: "/proc/self/cmdline") else { return [] }
        var parts = data.split(separator: 0, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        if parts.last == "" { parts.removeLast() }
        return Array(parts.dropFirst())
    }
}
