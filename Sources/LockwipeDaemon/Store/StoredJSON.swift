import Foundation

/// The coders of the JSON the store keeps in its columns (a wipe's report and requester, a
/// certificate's body, the server settings). The types spell the wire's snake-case keys
/// (`VarlinkCoding`); the store has always kept camelCase keys (the wire's keys converted
/// back: `peerUid`, `filesystemUuid`), and keeps them: values stored by earlier versions
/// read back, and an earlier version reads what this one stores.
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

    /// `files_overwritten` -> `filesOverwritten`: Foundation's `convertFromSnakeCase`.
    static func camelCase(_ key: String) -> String {
        let chars = Array(key)
        guard let first = chars.firstIndex(where: { $0 != "_" }), let last = chars.lastIndex(where: { $0 != "_" }) else { return key }
        let words = String(chars[first...last]).split(separator: "_")
        guard words.count > 1 else { return key }
        let joined = words[0].lowercased() + words.dropFirst().map { $0.prefix(1).uppercased() + $0.dropFirst().lowercased() }.joined()
        return String(chars[..<first]) + joined + String(chars[(last + 1)...])
    }

    /// `filesOverwritten` -> `files_overwritten`, `filesystemUUID` -> `filesystem_uuid`:
    /// Foundation's `convertToSnakeCase` (a word starts at each capital; a run of capitals
    /// is one word, less its last letter when a lower-case letter follows).
    static func snakeCase(_ key: String) -> String {
        let chars = Array(key)
        guard !chars.isEmpty else { return key }
        var words: [Range<Int>] = []
        var wordStart = 0
        var search = 1
        while let upper = chars[search...].firstIndex(where: \.isUppercase) {
            words.append(wordStart..<upper)
            search = upper
            guard let lower = chars[search...].firstIndex(where: \.isLowercase) else {
                wordStart = search
                break
            }
            if lower == upper + 1 {
                wordStart = upper
            } else {
                words.append(upper..<(lower - 1))
                wordStart = lower - 1
            }
            search = lower + 1
        }
        words.append(wordStart..<chars.count)
        return words.map { String(chars[$0]).lowercased() }.joined(separator: "_")
    }
}

private struct StoredKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ string: String) { stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}
