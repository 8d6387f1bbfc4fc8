import Crypto

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The offline code: a challenge the locked machine shows, read over the phone to a
/// helpdesk holding the fleet secret, and the response it reads back (docs/offline-codes.md).
///
/// - Alphabet: 31 characters that survive a phone call: the digits 2–9 and the capital
///   letters but I, L and O (no 0/O, 1/l/I). Input is read case-insensitively, ignoring
///   spaces and dashes, one Unicode scalar at a time (ASCII case only).
/// - A **challenge** carries 88 bits: the machine (40 bits of SHA-256 of
///   `/etc/machine-id`, never the raw id), the registration (20 bits of SHA-256 of its
///   id), what is asked (0: lift the lock; 1–255: extend the offline lease by that many
///   days) and a counter (20 bits) that makes every challenge single-use. As 18 base-31
///   digits and two check characters: 20 characters in five groups of four.
///   The two checks make the whole a one-error-correcting code over GF(31) (sums
///   Σv and Σ(i+1)v vanish): any one wrong character is caught, and where it is can be
///   named.
/// - The **response**: HMAC-SHA256 under the machine key over the challenge's content,
///   its first 8 bytes as a number modulo 31^9 (44.6 bits), as 9 base-31 digits and one
///   check character (Σ(i+1)v vanishes): 10 characters in two groups of five.
/// - The machine key: HKDF-SHA256 of the fleet secret, salt `lockwipe offline-code v1`,
///   info `machine ` and the machine id in hex; 32 bytes.
///
/// Pure: callers read the files and the clock.
public enum OfflineCode {
    /// The characters, in their order as base-31 digits.
    public static let alphabet: [Character] = Array("23456789ABCDEFGHJKMNPQRSTUVWXYZ")
    static let base = 31

    public static let machineBits = 40
    public static let registrationBits = 20
    public static let counterBits = 20
    public static let maxDays = 255
    static let challengeDigits = 18
    static let responseDigits = 9

    // MARK: What a challenge asks

    public enum Request: Equatable, Sendable, CustomStringConvertible {
        case lift
        case extend(days: Int)

        var code: UInt64 {
            switch self {
            case .lift: 0
            case .extend(let days): UInt64(days)
            }
        }

        public var description: String {
            switch self {
            case .lift: "lift the lock"
            case .extend(let days): "extend the offline lease by \(days) day\(days == 1 ? "" : "s")"
            }
        }
    }

    public struct Challenge: Equatable, Sendable {
        /// 40 bits (`machineID(fromMachineID:)`).
        public var machine: UInt64
        /// 20 bits (`registrationBits(ofID:)`).
        public var registration: UInt32
        public var request: Request
        /// 20 bits.
        public var counter: UInt32

        public init(machine: UInt64, registration: UInt32, request: Request, counter: UInt32) {
            self.machine = machine & mask(machineBits)
            self.registration = registration & UInt32(mask(registrationBits))
            self.request = request
            self.counter = counter & UInt32(mask(counterBits))
        }

        /// The 11 bytes the challenge carries, big-endian: machine, registration,
        /// request, counter. What the response's HMAC is computed over.
        public var content: [UInt8] {
            var value = (UInt128Parts(machine) << UInt64(registrationBits)) | UInt64(registration)
            value = (value << 8) | request.code
            value = (value << UInt64(counterBits)) | UInt64(counter)
            return value.bytes(11)
        }

        /// The challenge as it is read out: `ABCD-EFGH-JKMN-PQRS-TUVW`.
        public var text: String {
            let digits = UInt128Parts(bytes: content).digits(challengeDigits)
            return OfflineCode.group(withChecks(digits, count: 2), size: 4)
        }
    }

    // MARK: Reading codes

    /// Why a challenge or response does not read, in words for the person typing it.
    public enum ReadError: Error, Equatable, Sendable, CustomStringConvertible {
        /// A character (one Unicode scalar, `position` counted in scalars without dashes
        /// and blanks) that no code has. Never a whole grapheme cluster: one can be any
        /// length (a letter and 30,000 combining marks is one `Character`).
        case notInAlphabet(Unicode.Scalar, position: Int)
        case length(found: Int, expected: Int)
        /// One character of this group (1-based) is wrong, probably this one (1-based in the group).
        case wrongInGroup(group: Int, character: Int)
        /// The check does not match and the error cannot be placed: more than one character is wrong.
        case checkFailed
        /// A response's one check character does not match: one character or more was
        /// misread (one check catches every single error but cannot place it).
        case responseCheckFailed
        /// It reads, but is no challenge this version makes (too large, or no such request).
        case notAChallenge

        public var description: String {
            switch self {
            case .notInAlphabet(let c, let position):
                let hint = "01OIL".unicodeScalars.contains(OfflineCode.asciiUppercase(c)) ? " (the codes use no 0, 1, O, I or L)" : ""
                return "\(OfflineCode.shown(c)) (character \(position)) is not in the codes' alphabet\(hint)"
            case .length(let found, let expected):
                return "it has \(found) characters; expected \(expected) (dashes and spaces do not count)"
            case .wrongInGroup(let group, let character):
                return "the check characters do not match: group \(group) is wrong (probably its character \(character)); read it again"
            case .checkFailed:
                return "the check characters do not match: more than one character is wrong; read it again"
            case .responseCheckFailed:
                return "the check character does not match: a character was misread; read the code again"
            case .notAChallenge:
                return "the characters check, but they are not a challenge of this version of lockwipe"
            }
        }
    }

    /// Reads a challenge as typed.
    public static func readChallenge(_ text: String) throws(ReadError) -> Challenge {
        let values = try read(text, length: challengeDigits + 2)
        try verify(values, checks: 2, groupSize: 4)
        let number = UInt128Parts(digits: Array(values.prefix(challengeDigits)))
        guard number.hi < (1 << 24) else { throw .notAChallenge }  // 88 bits at most
        let bytes = number.bytes(11)
        var v = UInt128Parts(bytes: bytes)
        let counter = UInt32(v.lo & mask(counterBits))
        v = v >> UInt64(counterBits)
        let days = Int(v.lo & 0xFF)
        v = v >> 8
        let registration = UInt32(v.lo & mask(registrationBits))
        v = v >> UInt64(registrationBits)
        let machine = v.lo & mask(machineBits)
        return Challenge(machine: machine, registration: registration, request: days == 0 ? .lift : .extend(days: days), counter: counter)
    }

    /// Reads a response as typed, to its canonical text (the 10 characters, grouped).
    public static func readResponse(_ text: String) throws(ReadError) -> String {
        let values = try read(text, length: responseDigits + 1)
        try verify(values, checks: 1, groupSize: 5)
        return group(values, size: 5)
    }

    // MARK: Keys and the response

    /// The machine's id as the codes carry it: the first 40 bits of SHA-256 of
    /// `"lockwipe offline-code machine\0"` and the contents of `/etc/machine-id` (trimmed),
    /// and from key epoch 1 on, `"\0epoch "` and the epoch in decimal.
    ///
    /// The epoch is what makes a counter space used up give way to a new one without
    /// ever repeating a challenge under one key: the helpdesk derives the key from the
    /// machine field the challenge carries, so a new epoch is a new field and a new key,
    /// from the same fleet secret (docs/offline-codes.md, "Single use").
    public static func machineID(fromMachineID raw: String, epoch: Int = 0) -> UInt64 {
        let trimmed = Array(raw.utf8).drop { $0 == 0x20 || ($0 >= 0x09 && $0 <= 0x0D) }.reversed().drop { $0 == 0x20 || ($0 >= 0x09 && $0 <= 0x0D) }.reversed()
        var input = Array("lockwipe offline-code machine\0".utf8) + Array(trimmed)
        if epoch > 0 { input += Array("\0epoch \(epoch)".utf8) }
        let digest = Array(SHA256.hash(data: input))
        return digest.prefix(5).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }

    /// The counters one key epoch has: 1 to 2^20 - 1 (0 is never issued). A counter is
    /// never issued twice under one key: once they are used up, challenges are refused
    /// until the machine is provisioned for the next epoch (issue 40, finding 1: the counter
    /// used to wrap, and a response given once was accepted again).
    public static let countersPerEpoch = Int64(1) << Int64(counterBits) - 1

    /// The machine id in hex (10 characters), as `status` and the key derivation name it.
    public static func hex(machine: UInt64) -> String {
        let s = String(machine, radix: 16)
        return String(repeating: "0", count: max(0, 10 - s.count)) + s
    }

    /// The registration as the codes carry it: the first 20 bits of SHA-256 of its id.
    public static func registrationBits(ofID id: RegistrationID) -> UInt32 {
        let digest = Array(SHA256.hash(data: Array("lockwipe offline-code registration\0".utf8) + Array(id.rawValue.utf8)))
        return (UInt32(digest[0]) << 12 | UInt32(digest[1]) << 4 | UInt32(digest[2]) >> 4) & UInt32(mask(registrationBits))
    }

    /// The shortest fleet secret accepted (bytes).
    public static let minimumSecretLength = 16

    /// The fleet secret as a key file holds it: its bytes, without trailing newlines.
    public static func fleetSecret(fromFile bytes: [UInt8]) -> [UInt8] {
        var b = bytes
        while let last = b.last, last == 0x0A || last == 0x0D { b.removeLast() }
        return b
    }

    /// The machine key: HKDF-SHA256(fleet secret, salt `lockwipe offline-code v1`, info
    /// `machine <hex id>`), 32 bytes.
    public static func machineKey(fleetSecret: [UInt8], machine: UInt64) -> [UInt8] {
        let key = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: fleetSecret), salt: Array("lockwipe offline-code v1".utf8),
            info: Array("machine \(hex(machine: machine))".utf8), outputByteCount: 32)
        return key.withUnsafeBytes { Array($0) }
    }

    /// The response to `challenge` under `machineKey`, as read out: `ABCDE-FGHJK`.
    public static func response(to challenge: Challenge, machineKey: [UInt8]) -> String {
        let mac = Array(HMAC<SHA256>.authenticationCode(for: challenge.content, using: SymmetricKey(data: machineKey)))
        let first = mac.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let number = first % pow31(responseDigits)
        let digits = UInt128Parts(number).digits(responseDigits)
        return group(withChecks(digits, count: 1), size: 5)
    }

    /// Whether `given` (as typed) is the response to `challenge`, compared in constant time.
    public static func accepts(_ given: String, challenge: Challenge, machineKey: [UInt8]) -> Bool {
        guard let canonical = try? readResponse(given) else { return false }
        let expected = Array(response(to: challenge, machineKey: machineKey).utf8)
        let got = Array(canonical.utf8)
        guard expected.count == got.count else { return false }
        return zip(expected, got).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    // MARK: Digits and checks

    static func mask(_ bits: Int) -> UInt64 { (1 << UInt64(bits)) - 1 }

    static func pow31(_ n: Int) -> UInt64 { (0..<n).reduce(UInt64(1)) { p, _ in p * 31 } }

    /// The alphabet's values by ASCII code (-1: not in it).
    static let valueTable: [Int] = {
        var table = [Int](repeating: -1, count: 128)
        for (v, c) in alphabet.enumerated() { table[Int(c.asciiValue!)] = v }
        return table
    }()

    /// The value of one scalar, read case-insensitively (ASCII case only: no other
    /// letter's case mapping can give one of the alphabet's), or nil.
    static func value(of scalar: Unicode.Scalar) -> Int? {
        let ascii = asciiUppercase(scalar)
        guard ascii.isASCII else { return nil }
        let v = valueTable[Int(ascii.value)]
        return v < 0 ? nil : v
    }

    /// `scalar` with ASCII a–z made A–Z; anything else as it is.
    static func asciiUppercase(_ scalar: Unicode.Scalar) -> Unicode.Scalar {
        (0x61...0x7A).contains(scalar.value) ? Unicode.Scalar(UInt8(scalar.value - 0x20)) : scalar
    }

    /// A character as an error names it: printable ASCII as itself in quotes ('0'),
    /// anything else as its code point (U+00DF), which is short and shows what it is
    /// whatever the terminal does with it.
    public static func shown(_ scalar: Unicode.Scalar) -> String {
        if (0x21...0x7E).contains(scalar.value) { return "'\(Character(scalar))'" }
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }

    /// The values of the characters of `text` (dashes and blanks skipped), `length` of
    /// them. Read per Unicode scalar, so that what is typed is never handled as a grapheme
    /// cluster (of any length) nor case-mapped beyond ASCII.
    static func read(_ text: String, length: Int) throws(ReadError) -> [Int] {
        var values: [Int] = []
        var position = 0
        for scalar in text.unicodeScalars where scalar != "-" && !scalar.properties.isWhitespace {
            position += 1
            guard let v = value(of: scalar) else { throw .notInAlphabet(scalar, position: position) }
            values.append(v)
        }
        guard values.count == length else { throw .length(found: values.count, expected: length) }
        return values
    }

    /// `digits` followed by `count` (1 or 2) check digits such that Σ(i+1)·v ≡ 0 and, with
    /// two, Σv ≡ 0 (mod 31).
    static func withChecks(_ digits: [Int], count: Int) -> [Int] {
        let n = digits.count + count
        var s0 = 0  // Σv
        var s1 = 0  // Σ(i+1)v
        for (i, v) in digits.enumerated() {
            s0 = (s0 + v) % base
            s1 = (s1 + (i + 1) * v) % base
        }
        if count == 1 {
            // (n)·c ≡ -s1
            let c = (base - s1) % base * inverse(n) % base
            return digits + [c]
        }
        // c1 at position n-1 (weight n-1), c2 at n (weight n):
        //   c1 + c2 ≡ -s0,  (n-1)c1 + n·c2 ≡ -s1  ⇒  c2 ≡ -s1 + (n-1)s0,  c1 ≡ -s0 - c2
        let c2 = ((base - s1) + (n - 1) * s0) % base
        let c1 = ((base - s0) + (base - c2)) % base
        return digits + [c1, c2]
    }

    /// Checks `values`; with two checks, names the group of a single wrong character.
    static func verify(_ values: [Int], checks: Int, groupSize: Int) throws(ReadError) {
        var s0 = 0
        var s1 = 0
        for (i, v) in values.enumerated() {
            s0 = (s0 + v) % base
            s1 = (s1 + (i + 1) * v) % base
        }
        if checks == 1 {
            guard s1 == 0 else { throw .responseCheckFailed }
            return
        }
        if s0 == 0 && s1 == 0 { return }
        // One error e at position p (1-based): s0 = e, s1 = p·e.
        guard s0 != 0 else { throw .checkFailed }
        let p = s1 * inverse(s0) % base
        guard p >= 1, p <= values.count else { throw .checkFailed }
        throw .wrongInGroup(group: (p - 1) / groupSize + 1, character: (p - 1) % groupSize + 1)
    }

    static func inverse(_ a: Int) -> Int {
        // 31 is prime: a^(29) mod 31.
        var result = 1
        var b = a % base
        var e = base - 2
        while e > 0 {
            if e & 1 == 1 { result = result * b % base }
            b = b * b % base
            e >>= 1
        }
        return result
    }

    static func group(_ values: [Int], size: Int) -> String {
        var out = ""
        for (i, v) in values.enumerated() {
            if i > 0 && i % size == 0 { out.append("-") }
            out.append(alphabet[v])
        }
        return out
    }
}
