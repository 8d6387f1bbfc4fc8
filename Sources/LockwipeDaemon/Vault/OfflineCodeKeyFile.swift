import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeVaultIO

/// This machine's offline-code key (docs/offline-codes.md): 37 bytes, the 5-byte machine id
/// it was derived for, then the 32-byte key (HKDF of the fleet secret; the fleet secret is
/// never stored). Kept as the machine key is (`SealedSecret`): `offline-code.key.cred`,
/// sealed with systemd's credentials, or the plain `offline-code.key` where `[keys] seal`
/// does not seal; 0600 in the 0700 state directory, removed with it when the package is
/// purged. Replacing it overwrites the file in place: nothing is renamed over it.
struct OfflineCodeKeyFile: Sendable {
    static let fileName = "offline-code.key"
    static let size = 5 + 32
    static let machineIDPath = "/etc/machine-id"

    let secret: SealedSecret
    let sealer: CredentialSealer
    var path: String { sealer.seals ? secret.sealedPath : secret.plainPath }

    init(stateDirectory: String, sealer: CredentialSealer) {
        self.secret = SealedSecret(name: "lockwipe-offline-code-key", plainFile: Self.fileName, stateDirectory: stateDirectory, size: Self.size)
        self.sealer = sealer
    }

    struct Contents: Sendable {
        var machine: UInt64
        var key: [UInt8]
    }

    /// The stored key, or nil when offline codes are not provisioned. A plain file of an
    /// older version is sealed (and destroyed) here when `[keys] seal` seals.
    func load() async throws -> Contents? {
        guard var loaded = try await secret.load(sealer) else { return nil }
        defer { loaded.secret.wipe() }
        let bytes = loaded.secret
        let machine = bytes.prefix(5).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return Contents(machine: machine, key: Array(bytes[5..<Self.size]))
    }

    /// Stores `contents`, sealed as `[keys] seal` says; an existing file is overwritten in
    /// place (nothing is renamed over it). Returns whether a key was there (and was replaced).
    @discardableResult
    func store(_ contents: Contents) async throws -> Bool {
        var bytes = (0..<5).reversed().map { UInt8(truncatingIfNeeded: contents.machine >> UInt64($0 * 8)) } + contents.key
        defer { bytes.wipe() }
        precondition(bytes.count == Self.size)
        return try await secret.store(bytes, sealer).replaced
    }

    /// This machine's id as the codes of key epoch `epoch` carry it, from `/etc/machine-id`.
    static func thisMachine(path: String = machineIDPath, epoch: Int = 0) throws -> UInt64 {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw FileSystemError("read", path + " (offline codes name the machine by an id derived from it)", code: ENOENT)
        }
        guard text.contains(where: { !$0.isWhitespace }) else { throw FileSystemError("read", path + " (it is empty)", code: EINVAL) }
        return OfflineCode.machineID(fromMachineID: text, epoch: epoch)
    }
}
