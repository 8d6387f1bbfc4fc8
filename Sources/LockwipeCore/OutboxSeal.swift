import Crypto

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Who and what a sealed outbox is: stored in the clear at the head of the file (so that
/// `lockwipectl outbox open` and the server can say whose it is before opening it) and
/// authenticated by every sealed chunk, so that none of it can be changed.
public struct OutboxHeader: Sendable, Equatable {
    /// The recovery key (or the outbox's own recipient) it is sealed to.
    public var recipient: String
    public var registration: RegistrationID
    public var user: String
    /// When it was sealed, in seconds since the epoch.
    public var sealedAt: Int64
    /// Why: the trigger of the lock, wipe or unregister it was sealed before.
    public var reason: String

    public init(recipient: String, registration: RegistrationID, user: String, sealedAt: Int64, reason: String) {
        self.recipient = recipient
        self.registration = registration
        self.user = user
        self.sealedAt = sealedAt
        self.reason = reason
    }
}

/// One file of a sealed outbox, as it was in the vault.
public struct OutboxFile: Sendable, Equatable {
    /// Its absolute path in the vault, as it was when sealed.
    public var path: String
    /// Its permission bits.
    public var mode: UInt32
    /// Its modification time, in seconds since the epoch.
    public var modified: Int64
    public var contents: [UInt8]

    public init(path: String, mode: UInt32, modified: Int64, contents: [UInt8]) {
        self.path = path
        self.mode = mode
        self.modified = modified
        self.contents = contents
    }
}

public struct OutboxSealError: Error, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// A vault's outbox sealed to the organisation (issue 44): the files an application had not
/// yet uploaded, with their paths, sealed before the vault is locked or wiped, so that the
/// next user of the machine and a thief read none of it and the organisation loses none.
///
/// The file (`.lwo`):
/// - "LWOUTBOX" and the format byte 1;
/// - the header (`OutboxHeader`) as five length-prefixed UTF-8 fields (u16 big-endian
///   lengths; the time as its decimal text), then HPKE's encapsulated key (u16 length);
/// - the chunks: u32 big-endian length, then the chunk sealed by HPKE's context in order.
///   Each chunk's associated data is every byte before the first chunk and one byte, 1
///   for the last chunk and 0 for the others: a chunk moved, dropped or cut off does not
///   open, and neither does a file whose header was changed.
///
/// HPKE (RFC 9180) base mode with DHKEM(X25519, HKDF-SHA256), HKDF-SHA256 and
/// ChaCha20-Poly1305, as `RecoveryKey`, with the info "lockwipe outbox\0" (a recovery wrap
/// never opens as an outbox, nor the reverse). The chunks' plaintext is a stream of
/// records: `F`, u16 path length, path, u32 mode, i64 modification time, then the
/// contents as pieces (`D`, u32 length, bytes) and `E`; the stream ends with `Z` and
/// the number of files (u32). Pure: the caller writes `take()`'s bytes where they go.
public struct OutboxSealer {
    static let magic: [UInt8] = Array("LWOUTBOX".utf8) + [1]
    static let info = Data("lockwipe outbox".utf8) + Data([0])
    /// The plaintext of one chunk, at most.
    public static let chunkSize = 64 * 1024

    private var sender: HPKE.Sender
    private let prologue: [UInt8]
    private var plain: [UInt8] = []
    private var ready: [UInt8]
    private var files: UInt32 = 0
    private var inFile = false
    private var finished = false

    public init(to recipient: RecoveryPublicKey, header: OutboxHeader) throws {
        sender = try HPKE.Sender(recipientKey: recipient.key, ciphersuite: RecoveryKey.ciphersuite, info: Self.info)
        var h = Self.magic
        var header = header
        header.recipient = recipient.identifier
        for field in Self.fields(header) { h.appendU16Prefixed(field) }
        h.appendU16Prefixed(Array(sender.encapsulatedKey))
        prologue = h
        ready = h
        plain.reserveCapacity(Self.chunkSize + 1024)
    }

    static func fields(_ h: OutboxHeader) -> [[UInt8]] {
        [h.recipient, h.registration.rawValue, h.user, String(h.sealedAt), h.reason].map { Array($0.utf8.prefix(4096)) }
    }

    /// The sealed bytes made so far, to be written out in order.
    public mutating func take() -> [UInt8] {
        defer { ready.removeAll(keepingCapacity: true) }
        return ready
    }

    public mutating func beginFile(path: String, mode: UInt32, modified: Int64) throws {
        precondition(!inFile && !finished)
        plain.append(UInt8(ascii: "F"))
        plain.appendU16Prefixed(Array(path.utf8.prefix(Int(UInt16.max))))
        plain.appendInteger(mode)
        plain.appendInteger(UInt64(bitPattern: modified))
        inFile = true
        files += 1
        try flush(final: false)
    }

    public mutating func append(_ bytes: UnsafeRawBufferPointer) throws {
        precondition(inFile)
        var rest = bytes[...]
        while !rest.isEmpty {
            let piece = rest.prefix(Self.chunkSize)
            plain.append(UInt8(ascii: "D"))
            plain.appendInteger(UInt32(piece.count))
            plain.append(contentsOf: piece)
            rest = rest.dropFirst(piece.count)
            try flush(final: false)
        }
    }

    public mutating func endFile() throws {
        precondition(inFile)
        plain.append(UInt8(ascii: "E"))
        inFile = false
        try flush(final: false)
    }

    /// Seals the last chunk; `take()` then returns the end of the file.
    public mutating func finish() throws {
        precondition(!inFile && !finished)
        plain.append(UInt8(ascii: "Z"))
        plain.appendInteger(files)
        try flush(final: true)
        finished = true
    }

    private mutating func flush(final: Bool) throws {
        while plain.count >= Self.chunkSize || (final && !plain.isEmpty) {
            let n = min(plain.count, Self.chunkSize)
            let last = final && n == plain.count
            let sealed = try sender.seal(plain[..<n], authenticating: prologue + [last ? 1 : 0])
            ready.appendInteger(UInt32(sealed.count))
            ready.append(contentsOf: sealed)
            plain.removeFirst(n)
        }
    }
}

/// Opening a sealed outbox (`OutboxSealer`): its header, read without a key, and its files,
/// with the organisation's private key.
public enum OutboxOpener {
    /// Reads the clear header of a sealed outbox.
    public static func header(_ data: [UInt8]) throws(OutboxSealError) -> OutboxHeader {
        var reader = ByteReader(data)
        return try readPrologue(&reader).header
    }

    /// Opens `data` with `privateKey`: its header and its files, in the order sealed.
    /// Throws in words when it is not a sealed outbox, sealed to another key, damaged or
    /// cut short.
    public static func open(_ data: [UInt8], privateKey: Curve25519.KeyAgreement.PrivateKey) throws(OutboxSealError) -> (OutboxHeader, [OutboxFile]) {
        var reader = ByteReader(data)
        let (header, encapsulated, prologueLength) = try readPrologue(&reader)
        let mine = RecoveryPublicKey(privateKey.publicKey).identifier
        guard header.recipient == mine else {
            throw OutboxSealError("it is sealed to the key \(header.recipient), and this private key is \(mine)")
        }
        var recipient: HPKE.Recipient
        do {
            recipient = try HPKE.Recipient(
                privateKey: privateKey, ciphersuite: RecoveryKey.ciphersuite, info: OutboxSealer.info, encapsulatedKey: Data(encapsulated))
        } catch {
            throw OutboxSealError("its encapsulated key is damaged")
        }
        let prologue = Array(data[..<prologueLength])
        var plain: [UInt8] = []
        var sawLast = false
        var index = 0
        while !reader.atEnd {
            guard !sawLast else { throw OutboxSealError("it has bytes after its last chunk") }
            guard let length = reader.u32(), let chunk = reader.bytes(Int(length)) else {
                throw OutboxSealError("chunk \(index + 1) is cut short")
            }
            // The last chunk says it is the last: a copy cut at a chunk's end does not open.
            if let opened = try? recipient.open(chunk, authenticating: prologue + [reader.atEnd ? 1 : 0]) {
                plain.append(contentsOf: opened)
                sawLast = reader.atEnd
            } else {
                throw OutboxSealError("chunk \(index + 1) does not open with this private key (damaged, cut short or changed)")
            }
            index += 1
        }
        guard sawLast else { throw OutboxSealError("it is cut short: its last chunk is missing") }
        return (header, try files(plain))
    }

    static func readPrologue(_ reader: inout ByteReader) throws(OutboxSealError) -> (header: OutboxHeader, encapsulated: [UInt8], length: Int) {
        guard reader.bytes(OutboxSealer.magic.count) == OutboxSealer.magic else {
            throw OutboxSealError("it is not a sealed outbox of this version (it must begin with LWOUTBOX and format 1)")
        }
        var fields: [String] = []
        for _ in 0..<5 {
            guard let n = reader.u16(), let bytes = reader.bytes(Int(n)), let text = String(validating: bytes, as: UTF8.self) else {
                throw OutboxSealError("its header is damaged")
            }
            fields.append(text)
        }
        guard let sealedAt = Int64(fields[3]), let n = reader.u16(), let encapsulated = reader.bytes(Int(n)) else {
            throw OutboxSealError("its header is damaged")
        }
        let header = OutboxHeader(recipient: fields[0], registration: RegistrationID(fields[1]), user: fields[2], sealedAt: sealedAt, reason: fields[4])
        return (header, encapsulated, reader.offset)
    }

    static func files(_ plain: [UInt8]) throws(OutboxSealError) -> [OutboxFile] {
        var r = ByteReader(plain)
        var files: [OutboxFile] = []
        let damaged = OutboxSealError("its contents are damaged")
        while let tag = r.byte() {
            switch tag {
            case UInt8(ascii: "F"):
                guard let n = r.u16(), let pathBytes = r.bytes(Int(n)), let mode = r.u32(), let modified = r.u64() else { throw damaged }
                var contents: [UInt8] = []
                pieces: while true {
                    switch r.byte() {
                    case UInt8(ascii: "D"):
                        guard let length = r.u32(), let piece = r.bytes(Int(length)) else { throw damaged }
                        contents.append(contentsOf: piece)
                    case UInt8(ascii: "E"): break pieces
                    default: throw damaged
                    }
                }
                files.append(OutboxFile(path: String(decoding: pathBytes, as: UTF8.self), mode: mode, modified: Int64(bitPattern: modified), contents: contents))
            case UInt8(ascii: "Z"):
                guard let count = r.u32(), Int(count) == files.count, r.atEnd else { throw damaged }
                return files
            default: throw damaged
            }
        }
        throw damaged
    }
}

struct ByteReader {
    let data: [UInt8]
    var offset = 0
    init(_ data: [UInt8]) { self.data = data }
    var atEnd: Bool { offset >= data.count }

    mutating func bytes(_ n: Int) -> [UInt8]? {
        guard n >= 0, data.count - offset >= n else { return nil }
        defer { offset += n }
        return Array(data[offset..<offset + n])
    }
    mutating func byte() -> UInt8? { bytes(1)?.first }
    mutating func u16() -> UInt16? { bytes(2).map { $0.reduce(0) { $0 << 8 | UInt16($1) } } }
    mutating func u32() -> UInt32? { bytes(4).map { $0.reduce(0) { $0 << 8 | UInt32($1) } } }
    mutating func u64() -> UInt64? { bytes(8).map { $0.reduce(0) { $0 << 8 | UInt64($1) } } }
}

extension [UInt8] {
    mutating func appendInteger<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.bigEndian) { append(contentsOf: $0) }
    }
    mutating func appendU16Prefixed(_ bytes: [UInt8]) {
        appendInteger(UInt16(bytes.count))
        append(contentsOf: bytes)
    }
}
