import Foundation
import LockwipeCore
import LockwipeDaemon
import Testing

/// `journalctl -x` explains an entry only when the catalog (systemd/lockwipe.catalog,
/// installed to /usr/lib/systemd/catalog/) has its MESSAGE_ID: every id the daemon logs
/// must have an entry with a subject, and the catalog must not describe ids that no longer exist.
@Suite struct CatalogTests {
    static let catalogURL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("systemd/lockwipe.catalog")

    /// id -> the entry's header and text, as journald's catalog parser splits them.
    static func entries() throws -> [String: [String]] {
        let text = try String(contentsOf: catalogURL, encoding: .utf8)
        var result: [String: [String]] = [:]
        var current: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("-- ") {
                let id = String(line.dropFirst(3).split(separator: " ").first ?? "")
                #expect(result[id] == nil, "duplicate catalog entry \(id)")
                current = id
                result[id] = []
            } else if let id = current {
                result[id]!.append(String(line))
            }
        }
        return result
    }

    @Test func everyMessageIDHasAnEntryWithASubject() throws {
        let entries = try Self.entries()
        for id in MessageID.allCases {
            let entry = try #require(entries[id.rawValue], "no catalog entry for MessageID.\(id) (\(id.rawValue))")
            let subject = entry.first { $0.hasPrefix("Subject: ") }
            #expect(subject.map { $0.count > "Subject: ".count } == true, "catalog entry \(id.rawValue) has no Subject:")
            #expect(entry.contains { $0.hasPrefix("Defined-By: lockwipe") }, "catalog entry \(id.rawValue) has no Defined-By:")
        }
    }

    @Test func everyEntryBelongsToAMessageID() throws {
        let known = Set(MessageID.allCases.map(\.rawValue))
        for id in try Self.entries().keys {
            #expect(id.count == 32 && id.allSatisfy(\.isHexDigit) && id == id.lowercased(), "\(id) is not a 128-bit id in lower-case hex")
            #expect(known.contains(id), "catalog entry \(id) matches no MessageID")
        }
    }
}
