import Foundation
import LockwipeCore
import Testing

/// The version has one home, packaging/debian/changelog; Version.swift is generated from
/// it. A package whose binaries report another version than `dpkg -l` would mislead every
/// operator who reads `lockwipectl --version` or `status --json`.
@Suite struct VersionTests {
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test func binariesReportTheChangelogVersion() throws {
        let changelog = try String(
            contentsOf: Self.repository.appendingPathComponent("packaging/debian/changelog"), encoding: .utf8)
        let firstLine = try #require(changelog.split(separator: "\n").first)
        // "lockwipe (1:0.2.0-1) unstable; urgency=medium" -> "0.2.0"
        let open = try #require(firstLine.firstIndex(of: "("))
        let close = try #require(firstLine.firstIndex(of: ")"))
        var version = String(firstLine[firstLine.index(after: open)..<close])
        if let colon = version.firstIndex(of: ":") { version = String(version[version.index(after: colon)...]) }
        if let dash = version.lastIndex(of: "-") { version = String(version[..<dash]) }
        #expect(
            LockwipeVersion.current == version,
            "Version.swift says \(LockwipeVersion.current), packaging/debian/changelog says \(version): run scripts/update-version")
    }
}
