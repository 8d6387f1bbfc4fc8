import Foundation
import LockwipeBase
import Testing

@testable import LockwipeDaemon

/// `ProcFile`: a `/proc` file is read to its end, not to the first 4 KiB Foundation stops at
/// (the mount table of a service's namespace is longer than that).
@Suite struct ProcFileTests {
    @Test func aProcFileLongerThanOnePageIsReadWhole() throws {
        // The test process maps far more than 4 KiB of lines; [vsyscall]/[stack] come last.
        let maps = try #require(ProcFile.read("/proc/self/maps"))
        #expect(maps.utf8.count > 4096)
        #expect(maps.hasSuffix("\n"))
        #expect(maps.contains("[stack]"))
        let truncated = (try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8)) ?? ""
        #expect(maps.utf8.count >= truncated.utf8.count)
    }

    @Test func oneBufferServesALongReadThenAShortOne() throws {
        var buffer: [UInt8] = []
        let long = try #require(ProcFile.read("/proc/self/maps", into: &buffer))
        #expect(long > 4096 && buffer.count >= long)
        let short = try #require(ProcFile.read("/proc/self/comm", into: &buffer))
        let comm = try #require(ProcFile.read("/proc/self/comm"))
        #expect(String(decoding: buffer[0..<short], as: UTF8.self) == comm)
        #expect(ProcFile.read("/proc/self/no-such-file", into: &buffer) == nil)
    }

    @Test func aMissingFileIsNil() {
        #expect(ProcFile.read("/proc/self/no-such-file") == nil)
    }
}
