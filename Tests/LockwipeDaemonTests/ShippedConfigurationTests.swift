import Foundation
import Testing

@testable import LockwipeDaemon

/// The package ships packaging/etc/lockwipe/lockwiped.toml as /etc/lockwipe/lockwiped.toml.
/// Operators read its commented-out values as the defaults and uncomment them to change
/// them: the file as shipped must change nothing, and every commented value must be the
/// real default and a valid setting.
@Suite struct ShippedConfigurationTests {
    static let path = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("packaging/etc/lockwipe/lockwiped.toml").path

    func load(_ text: String) throws -> Configuration {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lwshipped-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try text.write(toFile: dir + "/lockwiped.toml", atomically: true, encoding: .utf8)
        do throws(ConfigurationError) {
            return try ConfigurationLoader.load(path: dir + "/lockwiped.toml").configuration
        } catch {
            Issue.record("\(error)")
            throw error
        }
    }

    @Test func asShippedItIsValidAndChangesNothing() throws {
        let text = try String(contentsOfFile: Self.path, encoding: .utf8)
        #expect(try load(text) == Configuration())
    }

    @Test func everyCommentedValueIsTheDefault() throws {
        let text = try String(contentsOfFile: Self.path, encoding: .utf8)
        var uncommented = 0
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            // "#key = value" (no space after '#') is a setting; "# text" is prose.
            if line.hasPrefix("#"), let first = line.dropFirst().first, first.isLetter, line.contains(" = ") {
                uncommented += 1
                return String(line.dropFirst())
            }
            return String(line)
        }
        #expect(uncommented >= 12, "expected every setting to be shown; found \(uncommented)")
        #expect(try load(lines.joined(separator: "\n")) == Configuration())
    }
}
