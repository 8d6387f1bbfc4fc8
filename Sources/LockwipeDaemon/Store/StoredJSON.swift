import Foundation

/// The coders of the JSON the store keeps in its columns (a wipe's report and requester, a
/// certificate's body, the server settings).
///
/// The types spell the wire's snake-case keys (`files_overwritten`, `peer_uid`), so that
/// `VarlinkCoding` decodes with the default key strategy. The store has always kept those
/// keys in camelCase (`filesOverwritten`, `peerUid`), and keeps them: rows written by earlier
/// versions read back unchanged, an earlier version reads what this one writes, and a
/// certificate's stored body is never rewritten. Every wire key is lower-case words joined by
/// `_`, so the two spellings convert into each other exactly: split at `_` and capitalize, or
/// split before each capital and lower it.
enum StoredJSON {
    static func encoder(sortedKeys: Bool = false) -> JSONEncoder {
        let e = JSONEncoder()
        if sortedKeys { e.outputFormatting = [.sortedKeys] }
        e.keyEncodingStrategy = .custom { path in StoredKey(camelCase(path.last!.stringValue)) }
        return e
    }

    static func decoder() -> JSONDecoder {
        let d = JSONDecoder()
        d.keyDecodingStrategy = .custom { path in StoredKey(snakeCase(path.last!.stringValue)) }
        return d
    }

    /// `files_overwritten` -> `filesOverwritten`.
    static func camelCase(_ key: String) -> String {
        let words = key.split(separator: "_", omittingEmptySubsequences: false)
        return words.dropFirst().reduce(String(words[0])) { $0 + $1.prefix(1).uppercased() + $1.dropFirst() }
    }

    /// `filesOverwritten` -> `files_overwritten`.
    static func snakeCase(_ key: String) -> String {
        var out = ""
        for c in key {
            if c.isUppercase { out += "_" + c.lowercased() } else { out.append(c) }
        }
        return out
    }
}

private struct StoredKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ string: String) { stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}
