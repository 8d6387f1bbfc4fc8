import LockwipeWipe

/// What a wipe of one registration would do now (`lockwipectl wipe --dry-run`): how it
/// would erase, and per vault what it found, read without changing anything. `Control/`
/// turns it into the wire's `WipePreview`s.
struct WipePlan: Sendable {
    enum Method: Sendable, Equatable {
        /// Destroy the vault key, then unlink the ciphertext (an encrypted vault whose key is stored).
        case cryptoErase
        /// Overwrite the files (`[wipe] passes`), then unlink.
        case overwrite
        /// Unlink without overwriting (`[wipe] passes = 0`).
        case unlink
    }

    var user: String
    var method: Method
    var passes: Int
    var pattern: String
    var surveys: [VaultSurvey]
}
