/// `[keys] seal`: how lockwiped keeps its own secrets (the machine key and the offline-code
/// key) on the disk (docs/key-material.md).
public enum SealSetting: String, Sendable, Equatable, CaseIterable {
    /// systemd's credentials with `--with-key=auto`: the TPM2 and the host key where systemd
    /// finds a TPM2, the host key alone where it does not; a plain file where
    /// `systemd-creds` is missing (outside systemd: a demo, a container).
    case auto
    /// The TPM2 and the host key, or lockwiped refuses to make or migrate a secret.
    case tpm2
    /// The host key alone (`/var/lib/systemd/credential.secret`): a copy of the disk opens it.
    case host
    /// A plain file, as before issue 43: a copy of the disk opens it.
    case none
}

/// What keeps one of lockwiped's secrets at rest, as its file says (a credential's header
/// names the key it is sealed with).
public enum KeySealing: String, Sendable, Codable, Equatable {
    /// Sealed to this machine's TPM2 (and the host key): a copy of the disk opens nothing.
    case tpm2
    /// Sealed with the host key alone, which lies on the same disk.
    case host
    /// Not sealed: the raw key is in the state directory.
    case plain
}

/// A registration's protection at rest: what someone who holds a copy of the disk (a
/// thief, an image backup) gets of its vault. Decided from the vault's kind, what wraps its
/// key, and how the machine key is kept (`of`); shown in `status`, the metrics and the journal.
public enum AtRest: String, Sendable, Codable, Equatable, CaseIterable {
    /// An encrypted vault whose key opens only with the TPM-sealed machine key (alone, or
    /// with the user's passcode).
    case tpm2
    /// An encrypted vault whose key needs the machine key, sealed with the host key alone.
    case host
    /// An encrypted vault whose key needs the machine key, and that key is a plain file.
    case disk
    /// An encrypted vault whose key the user's passcode alone opens: a copy of the disk is
    /// open to offline guessing.
    case passcode
    /// A permission vault: plain files, readable by anyone who holds the disk.
    case none

    /// `passcodeAlone`: the user's passcode alone opens the key (a passcode wrap of an older
    /// format: not the machine key too); `sealing`: how the machine key is kept (nil: not
    /// known, because there is none yet).
    public static func of(_ protection: Protection, passcodeAlone: Bool, sealing: KeySealing?) -> AtRest {
        guard protection == .encrypted else { return .none }
        if passcodeAlone { return .passcode }
        switch sealing {
        case .tpm2: return .tpm2
        case .host: return .host
        case .plain, nil: return .disk
        }
    }

    /// One line for `status` and the journal: what a copy of the disk gives away.
    public var sentence: String {
        switch self {
        case .tpm2: return "sealed to this machine's TPM: a copy of the disk opens nothing, nor can a passcode be guessed at on it"
        case .host: return "host key only: a copy of the disk opens it (no TPM)"
        case .disk: return "machine key in a plain file: a copy of the disk opens it"
        case .passcode: return "the user's passcode: a copy of the disk is open to offline guessing"
        case .none: return "none: a permission vault, readable by anyone who holds the disk"
        }
    }

    /// Whether a copy of the disk opens the vault without guessing anything.
    public var copyOpensIt: Bool { self == .host || self == .disk || self == .none }
}
