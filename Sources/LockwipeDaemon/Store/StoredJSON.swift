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

    /// `files_overwritten` -> `filesOverwritten`. On the key's bytes: the keys are ASCII,
    /// and `Character`'s case properties cost three times the rest of a stored row's
    /// decode (27 µs against 12 µs for a server-settings row, `-O`).
    static func camelCase(_ key: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(key.utf8.count)
        var capitalize = false
        for b in key.utf8 {
            if b == UInt8(ascii: "_") {
                capitalize = true
                continue
            }
            out.append(capitalize && (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b) ? b - 32 : b)
            capitalize = false
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `filesOverwritten` -> `files_overwritten`.
    static func snakeCase(_ key: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(key.utf8.count + 4)
        for b in key.utf8 {
            if (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b) {
                out.append(UInt8(ascii: "_"))
                out.append(b + 32)
            } else {
                out.append(b)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

private struct StoredKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ string: String) { stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}
