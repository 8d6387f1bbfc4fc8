/// The outbox of every vault (`[outbox]`, issue 44): the directory, relative to each vault
/// directory, where an application keeps what it has not yet uploaded; lockwiped seals it
/// to the organisation before a lock or wipe takes it away from the application.
public struct OutboxConfiguration: Sendable, Equatable {
    /// `[outbox] directory`, relative to each vault directory; nil: no outbox.
    public var directory: String?
    /// `[outbox] recipient_public_key`: whom outboxes are sealed to; nil: the
    /// organisation's recovery key (`[keys] recovery_public_key`).
    public var recipient: RecoveryPublicKey?
    /// `[outbox] max_bytes`: the most a seal takes from one registration's outbox; files
    /// past it are left in the vault, and the seal says how many.
    public var maxBytes = 128 * 1024 * 1024
    /// `[outbox] max_files`: the most files a seal takes.
    public var maxFiles = 10_000
    /// `[outbox] upload_wait_seconds`: how long a wipe or unregister someone ordered
    /// waits for the sealed outbox to reach the policy server before it goes on.
    public var uploadWaitSeconds = 60
    /// `[outbox] offline_wipe`: what the offline policy's wipe does with the outbox.
    public var offlineWipe = OfflineWipe.destroy

    /// What the offline policy's wipe (and a passcode's retry limit) does with the outbox.
    public enum OfflineWipe: String, Sendable, CaseIterable {
        /// Destroyed with the vault, unsealed, and any sealed copy not yet uploaded
        /// destroyed too: SAP's wipe, which deletes unsynchronised offline data.
        case destroy
        /// Sealed first and kept for the next contact (the wipe never waits for it).
        case keep
    }
    /// How deep a seal goes into the outbox's subdirectories.
    public static let maxDepth = 16

    public init() {}

    /// Why `text` cannot be an outbox directory (nil when it can): a relative path inside
    /// the vault, without `.` or `..`, an empty component, or a component longer than 255
    /// bytes.
    public static func directoryProblem(_ text: String) -> String? {
        if text.hasPrefix("/") { return "must be relative to the vault directory (\"outbox\", \"app/outbox\"), not an absolute path" }
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        if text.isEmpty || parts.contains(where: \.isEmpty) { return "must be a relative path without empty components (\"outbox\", \"app/outbox\")" }
        if parts.contains(where: { $0 == "." || $0 == ".." }) { return "must stay inside the vault: no . or .. components" }
        if parts.contains(where: { $0.utf8.count > 255 }) { return "has a component longer than 255 bytes" }
        if text.utf8.contains(0) || text.utf8.count > 1024 { return "must be at most 1024 bytes, without NUL" }
        return nil
    }
}

/// When a vault's outbox is sealed (issue 44): whenever the vault leaves its
/// applications' hands while they may still hold work (a lock, a wipe, an unregister), but
/// for the wipes the machine does to itself.
public enum OutboxSealing {
    public enum Moment: String, Sendable, CaseIterable {
        case lock, wipe, unregister
    }

    /// Whether the outbox is sealed before `moment` set off by `trigger`: when someone
    /// takes the vault away from its applications while the work may be wanted elsewhere:
    /// the lock at logout (a shift change), a lock or wipe the server, an administrator or
    /// the user herself ordered, and an unregister. The machine's own enforcement does not
    /// seal: the offline policy's lock keeps the work in the vault for its user's return
    /// (a machine out of contact could not upload it anyway), and its wipe, like the one
    /// a passcode's retry limit sets off, destroys the outbox with the vault, as SAP's
    /// wipe deletes unsynchronised offline data, unless `[outbox] offline_wipe = "keep"`.
    /// A resumed lock or wipe was sealed for, or not, when it began.
    public static func seals(before moment: Moment, trigger: Trigger, offlineWipe: OutboxConfiguration.OfflineWipe = .destroy) -> Bool {
        switch (moment, trigger) {
        case (_, .resume), (.lock, .offline), (.lock, .retryLimit): false
        case (.wipe, .offline), (.wipe, .retryLimit): offlineWipe == .keep
        case (.lock, _), (.wipe, _), (.unregister, _): true
        }
    }

    /// Whether `moment` waits (up to `[outbox] upload_wait_seconds`) for the sealed outbox
    /// to reach the server: a wipe or unregister someone ordered, so that the receipt is
    /// in its certificate or history. A lock never waits (its upload runs beside it), nor
    /// does a wipe the machine does to itself.
    public static func waitsForUpload(before moment: Moment, trigger: Trigger) -> Bool {
        switch (moment, trigger) {
        case (.lock, _), (_, .resume), (.wipe, .offline), (.wipe, .retryLimit): false
        case (.wipe, _), (.unregister, _): true
        }
    }

    /// Whether the sealed outboxes kept for a registration are destroyed with its wipe
    /// (the offline policy's, or a retry limit's, with `offline_wipe = "destroy"`).
    public static func destroysKept(before moment: Moment, trigger: Trigger, offlineWipe: OutboxConfiguration.OfflineWipe) -> Bool {
        moment == .wipe && (trigger == .offline || trigger == .retryLimit) && offlineWipe == .destroy
    }
}

/// What the policy server answered to a sealed outbox's upload (docs/server-protocol.md,
/// "Outbox upload"), read without I/O.
public enum OutboxUploadAnswer: Sendable, Equatable {
    /// Stored: `201`, or `204` for a name stored before (a retry after a lost answer).
    /// `receipt`: the server's `X-Lockwipe-Receipt`, when it sent one.
    case received(status: Int, receipt: String?)
    /// Not uploaded, in words; tried again at the next contact.
    case notUploaded(String)

    public static func classify(status: Int, receipt: String?) -> Self {
        switch status {
        case 201, 204:
            // A receipt is the server's word: printable ASCII, bounded, or none.
            let clean = receipt.map { String($0.unicodeScalars.filter { $0.value >= 0x21 && $0.value < 0x7F }.prefix(128).map(Character.init)) }
            return .received(status: status, receipt: clean?.isEmpty == false ? clean : nil)
        case 401, 403: return .notUploaded("the server refused the registration's credentials (HTTP \(status))")
        case 404, 405: return .notUploaded("the server has no outbox upload endpoint (HTTP \(status))")
        case 413: return .notUploaded("the sealed outbox is larger than the server accepts (HTTP 413)")
        default: return .notUploaded("the server answered HTTP \(status)")
        }
    }
}
