import Foundation

/// The coders of the JSON the store keeps in its columns (a wipe's report and requester, a
/// certificate's body, the server settings).
enum StoredJSON {
    static func encoder(sortedKeys: Bool = false) -> JSONEncoder {
        let e = JSONEncoder()
        if sortedKeys { e.outputFormatting = [.sortedKeys] }
        return e
    }

    static func decoder() -> JSONDecoder {
        JSONDecoder()
    }
}
