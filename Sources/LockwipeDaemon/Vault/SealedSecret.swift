import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeVaultIO
import Subprocess

#if canImport(System)
    import System
#else
    import SystemPackage
#endif

/// Seals and opens lockwiped's own secrets with systemd's credentials (`systemd-creds
/// encrypt` and `decrypt`, systemd 250 and later): AES-256-GCM under a key derived from the
/// machine's TPM2 (bound to `[keys] tpm2_pcrs`) and the host key
/// (`/var/lib/systemd/credential.secret`), or the host key alone.
///
/// lockwiped runs `systemd-creds` itself rather than have PID 1 deliver the secrets with
/// `LoadCredentialEncrypted=`: PID 1 refuses to start a service whose credential does not
/// decrypt (status 243/CREDENTIALS; systemd/systemd#34740 asks for a soft failure), and
/// lockwiped must start and enforce when its key is lost (a PCR changed, the TPM cleared).
/// The secret passes through pipes only; it is never written in the clear.
public struct CredentialSealer: Sendable, Equatable {
    public var setting: SealSetting = .auto
    /// `[keys] tpm2_device`: a device node or a tpm2-tss TCTI ("swtpm:path=..."); nil: systemd's choice.
    public var tpm2Device: String?
    /// `[keys] tpm2_pcrs`: the PCRs the TPM2 binds the key to ("7", "7+11", "" for none).
    public var tpm2PCRs = "7"
    /// The `systemd-creds` to run (`LOCKWIPE_SYSTEMD_CREDS` in lockwiped's environment, for
    /// tests that stand in for the kernel's TPM resource manager).
    var executable = CredentialSealer.defaultExecutable

    static let defaultExecutable = "/usr/bin/systemd-creds"

    public init(setting: SealSetting = .auto, tpm2Device: String? = nil, tpm2PCRs: String = "7") {
        self.setting = setting
        self.tpm2Device = tpm2Device
        self.tpm2PCRs = tpm2PCRs
    }
    /// A credential of a 64-byte secret is about 700 bytes of base64 with a TPM2.
    static let credentialLimit = 16 * 1024

    /// Whether new secrets are sealed (else they are plain files: `none`, or `auto` without
    /// systemd-creds).
    var seals: Bool {
        switch setting {
        case .none: return false
        case .auto: return access(executable, X_OK) == 0
        case .tpm2, .host: return true
        }
    }

    /// `systemd-creds`' `--with-key=`.
    private var withKey: String {
        switch setting {
        case .tpm2: return "tpm2+host"
        case .host: return "host"
        case .auto, .none: return "auto"
        }
    }

    /// Seals `secret` under `name` (embedded in the credential and checked when it is
    /// opened): the credential, base64 text.
    func seal(_ secret: [UInt8], name: String) async throws -> [UInt8] {
        var arguments = ["encrypt", "--name=" + name, "--with-key=" + withKey]
        if setting != .host {
            if let tpm2Device { arguments.append("--tpm2-device=" + tpm2Device) }
            arguments.append("--tpm2-pcrs=" + tpm2PCRs)
        }
        arguments += ["-", "-"]
        var credential = try await run(arguments, input: secret, what: "seal the \(name)")
        guard let sealing = Self.sealing(ofCredential: credential) else {
            credential.wipe()
            throw SealingError("systemd-creds gave a credential this version of lockwiped cannot read")
        }
        if setting == .tpm2 && sealing != .tpm2 {
            throw SealingError("systemd-creds did not seal the \(name) to a TPM2 ([keys] seal = \"tpm2\")")
        }
        return credential
    }

    /// Opens the credential at `path`, sealed under `name`.
    func unseal(_ path: String, name: String) async throws -> [UInt8] {
        var arguments = ["decrypt", "--name=" + name]
        if let tpm2Device { arguments.append("--tpm2-device=" + tpm2Device) }
        arguments += [path, "-"]
        return try await run(arguments, input: [], what: "open the \(name)")
    }

    /// How long one `systemd-creds` may take: a TPM that does not answer must not hold the
    /// start-up pass (and READY=1) for TimeoutStartSec; the key is then unavailable.
    static let timeLimit: Duration = .seconds(30)

    private func run(_ arguments: [String], input: [UInt8], what: String) async throws -> [UInt8] {
        var options = PlatformOptions()
        options.teardownSequence = [.gracefulShutDown(allowedDurationToNextStep: .seconds(2))]
        let (platformOptions, executable) = (options, executable)
        let finished: (success: Bool, output: [UInt8], errors: String?)?
        do {
            finished = try await withThrowingTaskGroup(of: (success: Bool, output: [UInt8], errors: String?)?.self) { group in
                group.addTask {
                    let result = try await Subprocess.run(
                        .path(FilePath(executable)), arguments: Arguments(arguments), environment: .inherit, platformOptions: platformOptions,
                        input: .array(input), output: .bytes(limit: Self.credentialLimit), error: .string(limit: 16 * 1024))
                    return (result.terminationStatus.isSuccess, result.standardOutput, result.standardError)
                }
                group.addTask {
                    try await Task.sleep(for: Self.timeLimit)
                    return nil
                }
                let first = try await group.next() ?? nil
                group.cancelAll()
                return first
            }
        } catch {
            throw SealingError("cannot run \(executable) to \(what): \(ErrorWords.of(error))")
        }
        guard let (success, output, errors) = finished else {
            throw SealingError("systemd-creds did not \(what) within \(Self.timeLimit.components.seconds) s (the TPM does not answer)")
        }
        guard success else {
            var unused = output
            unused.wipe()
            let said = (errors ?? "").split(separator: "\n").filter { !$0.contains("not located on encrypted media") }.suffix(2).joined(separator: "; ")
            throw SealingError("systemd-creds could not \(what)" + (said.isEmpty ? "" : ": " + said))
        }
        return output
    }

    /// What seals a credential, from the id at the start of its header (systemd's
    /// src/shared/creds-util.h: CRED_AES256_GCM_BY_HOST, _BY_TPM2_HMAC,
    /// _BY_HOST_AND_TPM2_HMAC). nil: not a credential, or one of a kind this version
    /// does not know.
    static func sealing(ofCredential credential: [UInt8]) -> KeySealing? {
        let text = String(decoding: credential.prefix(64), as: UTF8.self).filter { !$0.isWhitespace }
        guard let head = Data(base64Encoded: String(text.prefix(24))), head.count >= 16 else { return nil }
        switch head.prefix(16).map({ String(format: "%02x", $0) }).joined() {
        case "5a1c6a86df9d4096b1d5a65e0862f19a": return .host
        case "0c7cc07b117645919c4b0bea08bc20fe", "93a894094874449090caf2fc93cab553": return .tpm2
        default: return nil
        }
    }
}

/// Why a secret could not be sealed or opened, in the operator's words.
struct SealingError: Error, CustomStringConvertible {
    var description: String
    /// How the secret that did not open is sealed, as its credential says.
    var sealing: KeySealing?
    init(_ description: String, sealing: KeySealing? = nil) {
        self.description = description
        self.sealing = sealing
    }
}

/// One of lockwiped's secrets in the state directory: `<name>.cred` when sealed, `<plain>`
/// when not (the form of every version before issue 43).
struct SealedSecret: Sendable {
    /// The name sealed into the credential ("lockwipe-machine-key").
    var name: String
    var plainPath: String
    var sealedPath: String
    var size: Int

    init(name: String, plainFile: String, stateDirectory: String, size: Int) {
        self.name = name
        self.size = size
        plainPath = stateDirectory + "/" + plainFile
        sealedPath = stateDirectory + "/" + plainFile + ".cred"
    }

    struct Loaded {
        var secret: [UInt8]
        var sealing: KeySealing
        /// Set when a plain file was sealed and destroyed by this load.
        var migrated: Bool
        /// Why a plain file could not be sealed (it stays, and is used as it is).
        var sealFailure: String? = nil
    }

    /// The secret, or nil when there is none. A sealed credential is opened; a plain file
    /// is sealed when `sealer` seals, the credential checked to open to the same bytes, and
    /// only then the plain file destroyed (overwritten in place, `fsync`ed, unlinked). A
    /// credential that does not open throws: the caller fails closed and destroys nothing.
    func load(_ sealer: CredentialSealer) async throws -> Loaded? {
        let plain = try await BlockingPool.run { [plainPath, size] in try SecretFile.read(plainPath, size: size) }
        if var plain {
            guard sealer.seals else { return Loaded(secret: plain, sealing: .plain, migrated: false) }
            // A crash may have left a credential of this same secret: made again, over it.
            // A plain key that cannot be sealed (no TPM2 with seal = "tpm2") is kept and
            // used as it is: nothing it wraps is locked out by a failed migration.
            let sealing: KeySealing
            do {
                sealing = try await write(plain, sealer)
            } catch {
                return Loaded(secret: plain, sealing: .plain, migrated: false, sealFailure: "\(error)")
            }
            do {
                try await BlockingPool.run { [plainPath] in try SecretFile.destroy(plainPath) }
            } catch {
                plain.wipe()
                throw error
            }
            return Loaded(secret: plain, sealing: sealing, migrated: true)
        }
        guard try await BlockingPool.run({ [sealedPath] in access(sealedPath, F_OK) == 0 || errno != ENOENT }) else { return nil }
        let credential = try await BlockingPool.run { [sealedPath] in try SecretFile.readAll(sealedPath, limit: CredentialSealer.credentialLimit) }
        guard let credential, let sealing = CredentialSealer.sealing(ofCredential: credential) else {
            throw SealingError("\(sealedPath) is not a credential lockwiped can read")
        }
        var secret: [UInt8]
        do {
            secret = try await sealer.unseal(sealedPath, name: name)
        } catch let error as SealingError {
            throw SealingError(error.description, sealing: sealing)
        }
        guard secret.count == size else {
            secret.wipe()
            throw SealingError("\(sealedPath) opened to \(secret.count) bytes, not \(size)", sealing: sealing)
        }
        return Loaded(secret: secret, sealing: sealing, migrated: false)
    }

    /// Stores `secret`: sealed when `sealer` seals (a plain file left by an older version
    /// is destroyed), else a plain file; an existing file is overwritten in place. Returns
    /// how it is kept and whether a secret was there before.
    func store(_ secret: [UInt8], _ sealer: CredentialSealer) async throws -> (sealing: KeySealing, replaced: Bool) {
        let existed = try await BlockingPool.run { [plainPath, sealedPath] in access(plainPath, F_OK) == 0 || access(sealedPath, F_OK) == 0 }
        guard sealer.seals else {
            try await BlockingPool.run { [plainPath] in
                do {
                    try SecretFile.create(plainPath, secret)
                } catch let error as FileSystemError where error.code == EEXIST {
                    try SecretFile.overwrite(plainPath, secret)
                }
            }
            return (.plain, existed)
        }
        let sealing = try await write(secret, sealer)
        try await BlockingPool.run { [plainPath] in try SecretFile.destroy(plainPath) }
        return (sealing, existed)
    }

    /// Moves a secret that no longer opens out of the way: its credential (or, when there
    /// is none, its plain file) to `<file>.unopenable-<N>` beside it, the first N free.
    /// Kept, not destroyed, in case the TPM state it was sealed to comes back. Returns the
    /// new path. Never replaces a file (a hard link, then the old name unlinked, then the
    /// directory `fsync`ed).
    func setAside() async throws -> String {
        try await BlockingPool.run { [sealedPath, plainPath] in
            try SecretFile.setAside(access(sealedPath, F_OK) == 0 ? sealedPath : plainPath)
        }
    }

    /// Seals `secret` to the credential file (made, or an existing one overwritten in
    /// place), and checks that it opens to the same bytes.
    private func write(_ secret: [UInt8], _ sealer: CredentialSealer) async throws -> KeySealing {
        var credential = try await sealer.seal(secret, name: name)
        defer { credential.wipe() }
        guard let sealing = CredentialSealer.sealing(ofCredential: credential) else { throw SealingError("systemd-creds gave an unreadable credential") }
        try await BlockingPool.run { [sealedPath, credential] in
            do {
                try SecretFile.create(sealedPath, credential)
            } catch let error as FileSystemError where error.code == EEXIST {
                try SecretFile.overwrite(sealedPath, credential)
            }
        }
        var opened = try await sealer.unseal(sealedPath, name: name)
        defer { opened.wipe() }
        guard opened == secret else { throw SealingError("the sealed \(name) did not open to the same key: nothing was changed") }
        return sealing
    }
}
