import Testing

@testable import LockwipeCore

/// The offline codes' encoding as tables. The fixed vectors were computed independently
/// with Python's hashlib/hmac (HKDF written out as RFC 5869's extract and expand):
///
///     import hashlib, hmac
///     m = int.from_bytes(hashlib.sha256(b"lockwipe offline-code machine\0"
///             + b"0123456789abcdef0123456789abcdef").digest()[:5], "big")   # 0xcd2b1e347f
///     r = int.from_bytes(hashlib.sha256(b"lockwipe offline-code registration\0"
///             + b"00112233445566778899aabbccddeeff").digest()[:3], "big") >> 4  # 0x237ed
///     prk = hmac.new(b"lockwipe offline-code v1", b"fleet-secret-for-tests-0123456789", hashlib.sha256).digest()
///     key = hmac.new(prk, b"machine cd2b1e347f" + b"\x01", hashlib.sha256).digest()
///     content = ((((m << 20 | r) << 8 | 0) << 20) | 1).to_bytes(11, "big")
///     mac = hmac.new(key, content, hashlib.sha256).digest()
///     # response: int.from_bytes(mac[:8], "big") % 31**9 in base 31, plus its check digit
struct OfflineCodeTests {
    static let machineIDFile = "0123456789abcdef0123456789abcdef\n"
    static let registrationID = RegistrationID("00112233445566778899aabbccddeeff")
    static let secret = Array("fleet-secret-for-tests-0123456789".utf8)

    @Test func machineAndRegistrationBitsMatchTheIndependentComputation() {
        #expect(OfflineCode.machineID(fromMachineID: Self.machineIDFile) == 0xcd2b1e347f)
        #expect(OfflineCode.machineID(fromMachineID: " 0123456789abcdef0123456789abcdef ") == 0xcd2b1e347f)
        #expect(OfflineCode.hex(machine: 0xcd2b1e347f) == "cd2b1e347f")
        #expect(OfflineCode.hex(machine: 0x7f) == "000000007f")
        #expect(OfflineCode.registrationBits(ofID: Self.registrationID) == 0x237ed)
    }

    @Test func hkdfAndHMACMatchTheIndependentComputation() {
        let key = OfflineCode.machineKey(fleetSecret: Self.secret, machine: 0xcd2b1e347f)
        let hex: String = key.map { (b: UInt8) -> String in (b < 16 ? "0" : "") + String(b, radix: 16) }.joined()
        #expect(hex == "01c2c884ed584f08d4215ef5b01c823b158b7bf120dc896b35d6c49bea712b4e")
        let lift = OfflineCode.Challenge(machine: 0xcd2b1e347f, registration: 0x237ed, request: .lift, counter: 1)
        #expect(lift.content == [0xcd, 0x2b, 0x1e, 0x34, 0x7f, 0x23, 0x7e, 0xd0, 0x00, 0x00, 0x01])
        #expect(OfflineCode.response(to: lift, machineKey: key) == "5RUBT-FRHMP")
        let extend = OfflineCode.Challenge(machine: 0xcd2b1e347f, registration: 0x237ed, request: .extend(days: 7), counter: 42)
        #expect(OfflineCode.response(to: extend, machineKey: key) == "6F76C-NGDGZ")
    }

    @Test(arguments: [
        (OfflineCode.Challenge(machine: 0xcd2b1e347f, registration: 0x237ed, request: .lift, counter: 1), "CZZ9-E3E2-H72K-X8HH-9K7J"),
        (OfflineCode.Challenge(machine: 0xcd2b1e347f, registration: 0x237ed, request: .extend(days: 7), counter: 42), "CZZ9-E3E2-H72K-XGFW-85E8"),
        (OfflineCode.Challenge(machine: 0, registration: 0, request: .lift, counter: 0), "2222-2222-2222-2222-2222"),
        (OfflineCode.Challenge(machine: (1 << 40) - 1, registration: (1 << 20) - 1, request: .extend(days: 255), counter: (1 << 20) - 1), "FRG4-8DFX-9UJY-WWN9-E9U2"),
    ])
    func challengeTextRoundTrips(challenge: OfflineCode.Challenge, text: String) throws {
        #expect(challenge.text == text)
        #expect(try OfflineCode.readChallenge(text) == challenge)
        #expect(try OfflineCode.readChallenge(String(text.lowercased().map { $0 == "-" ? " " : $0 })) == challenge)
        #expect(text.count <= 30)
    }

    @Test func everyAlphabetCharacterRoundTripsInEveryPosition() throws {
        #expect(OfflineCode.alphabet.count == 31)
        for bad in "0O1lIiLo" { #expect(!OfflineCode.alphabet.contains(bad)) }
        for (v, c) in OfflineCode.alphabet.enumerated() {
            let scalar = c.unicodeScalars.first!
            #expect(OfflineCode.value(of: scalar) == v)
            #expect(OfflineCode.value(of: Character(c.lowercased()).unicodeScalars.first!) == v)
            // A challenge whose every data digit is this character reads back to itself.
            let digits = [Int](repeating: v, count: OfflineCode.challengeDigits)
            let text = OfflineCode.group(OfflineCode.withChecks(digits, count: 2), size: 4)
            let number = UInt128Parts(digits: digits)
            if number.hi < (1 << 24) {
                #expect(try OfflineCode.readChallenge(text).text == text)
            } else {
                #expect(throws: OfflineCode.ReadError.notAChallenge) { try OfflineCode.readChallenge(text) }
            }
            let response = OfflineCode.group(OfflineCode.withChecks([Int](repeating: v, count: 9), count: 1), size: 5)
            #expect(try OfflineCode.readResponse(response) == response)
        }
    }

    @Test func theCheckCatchesOneWrongCharacterInEveryPositionAndNamesItsGroup() throws {
        let text = "CZZ9-E3E2-H72K-X8HH-9K7J"
        let plain = Array(text.filter { $0 != "-" })
        for position in plain.indices {
            for replacement in OfflineCode.alphabet where replacement != plain[position] {
                var wrong = plain
                wrong[position] = replacement
                #expect(throws: OfflineCode.ReadError.wrongInGroup(group: position / 4 + 1, character: position % 4 + 1)) {
                    try OfflineCode.readChallenge(String(wrong))
                }
            }
        }
        let response = Array("5RUBTFRHMP")
        for position in response.indices {
            for replacement in OfflineCode.alphabet where replacement != response[position] {
                var wrong = response
                wrong[position] = replacement
                // Not "more than one character is wrong" (issue 42): one was.
                #expect(throws: OfflineCode.ReadError.responseCheckFailed) { try OfflineCode.readResponse(String(wrong)) }
                #expect(!OfflineCode.ReadError.responseCheckFailed.description.contains("more than one"))
            }
        }
    }

    @Test(arguments: [
        ("CZZ9-E3E2-H72K-X8HH-9K7", OfflineCode.ReadError.length(found: 19, expected: 20)),
        ("CZZ9-E3E2-H72K-X8HH-9K7JJ", .length(found: 21, expected: 20)),
        ("CZZ9-E3E2-H72K-X8HH-9K70", .notInAlphabet("0", position: 20)),
        ("OZZ9-E3E2-H72K-X8HH-9K7J", .notInAlphabet("O", position: 1)),
        // Two characters swapped in one group: caught, not placed.
        ("ZCZ9-E3E2-H72K-X8HH-9K7J", .checkFailed),
    ])
    func challengesThatDoNotReadSayWhy(text: String, error: OfflineCode.ReadError) {
        #expect(throws: error) { try OfflineCode.readChallenge(text) }
    }

    // Issue 40, finding 9: codes are read per Unicode scalar, case-folded on ASCII only.
    // "ß" uppercases to "SS" (two characters: `Character("ß".uppercased())` trapped), "ﬀ"
    // to "FF", and a letter with 30,000 combining marks is one grapheme cluster of 60 KB:
    // each is refused at its first scalar outside the alphabet, named by its code point.
    @Test(
        arguments: [
            ("ß", OfflineCode.ReadError.notInAlphabet("\u{DF}", position: 1), "U+00DF (character 1) is not in the codes' alphabet"),
            ("ﬀ5RUBT-FRHMP", .notInAlphabet("\u{FB00}", position: 1), "U+FB00 (character 1) is not in the codes' alphabet"),
            ("5ß", .notInAlphabet("\u{DF}", position: 2), "U+00DF (character 2) is not in the codes' alphabet"),
            ("A\u{301}BCDE-FGHJK", .notInAlphabet("\u{301}", position: 2), "U+0301 (character 2) is not in the codes' alphabet"),
            ("A" + String(repeating: "\u{301}", count: 30_000), .notInAlphabet("\u{301}", position: 2), "U+0301 (character 2) is not in the codes' alphabet"),
            ("\u{1F600}", .notInAlphabet("\u{1F600}", position: 1), "U+1F600 (character 1) is not in the codes' alphabet"),
            ("5rubt\u{0}frhmp", .notInAlphabet("\u{0}", position: 6), "U+0000 (character 6) is not in the codes' alphabet"),
            ("0", .notInAlphabet("0", position: 1), "'0' (character 1) is not in the codes' alphabet (the codes use no 0, 1, O, I or L)"),
            ("l", .notInAlphabet("l", position: 1), "'l' (character 1) is not in the codes' alphabet (the codes use no 0, 1, O, I or L)"),
            // The Kelvin sign and the long s lowercase and uppercase to alphabet letters in
            // Unicode's case mappings, never in ASCII's.
            ("\u{212A}", .notInAlphabet("\u{212A}", position: 1), "U+212A (character 1) is not in the codes' alphabet"),
            ("\u{17F}", .notInAlphabet("\u{17F}", position: 1), "U+017F (character 1) is not in the codes' alphabet"),
        ] as [(String, OfflineCode.ReadError, String)])
    func unicodeIsReadPerScalarAndNamedByItsCodePoint(text: String, error: OfflineCode.ReadError, words: String) {
        #expect(throws: error) { try OfflineCode.readResponse(text) }
        #expect(throws: error) { try OfflineCode.readChallenge(text) }
        #expect(error.description == words)
    }

    @Test func lowercaseAsciiAndBlanksStillRead() throws {
        #expect(try OfflineCode.readResponse("5rubt frhmp") == "5RUBT-FRHMP")
        #expect(try OfflineCode.readResponse("5RUBT\u{A0}-\tFRHMP") == "5RUBT-FRHMP")
        // A long code of alphabet characters is refused by its length, in a few words.
        let long = String(repeating: "A", count: 60_000)
        #expect(throws: OfflineCode.ReadError.length(found: 60_000, expected: 10)) { try OfflineCode.readResponse(long) }
    }

    @Test func theResponseAcceptsItsChallengeOnlyUnderItsKey() {
        let key = OfflineCode.machineKey(fleetSecret: Self.secret, machine: 0xcd2b1e347f)
        let other = OfflineCode.machineKey(fleetSecret: Self.secret, machine: 0xcd2b1e347e)
        let c = OfflineCode.Challenge(machine: 0xcd2b1e347f, registration: 0x237ed, request: .lift, counter: 1)
        #expect(OfflineCode.accepts("5rubt frhmp", challenge: c, machineKey: key))
        #expect(!OfflineCode.accepts("5RUBT-FRHMP", challenge: c, machineKey: other))
        var changed = [c, c, c]
        changed[0].request = .extend(days: 1)
        changed[1].counter = 2
        changed[2].registration = 0x237ee
        for c in changed { #expect(!OfflineCode.accepts("5RUBT-FRHMP", challenge: c, machineKey: key)) }
        #expect(!OfflineCode.accepts("5RUBT-FRHMQ", challenge: c, machineKey: key))
    }

    @Test func fleetSecretFilesLoseOnlyTheirTrailingNewlines() {
        #expect(OfflineCode.fleetSecret(fromFile: Array("abc\n".utf8)) == Array("abc".utf8))
        #expect(OfflineCode.fleetSecret(fromFile: Array("abc\r\n\n".utf8)) == Array("abc".utf8))
        #expect(OfflineCode.fleetSecret(fromFile: Array(" abc ".utf8)) == Array(" abc ".utf8))
    }

    /// Key epochs (issue 40, finding 1): epoch 0 is the machine field every earlier
    /// version used; each later epoch is another field, and so another key from the same
    /// fleet secret. Values computed independently with Python's hashlib (the input of
    /// epoch N is the epoch-0 input followed by `"\0epoch N"`).
    @Test(arguments: [(0, UInt64(0xcd_2b1e_347f)), (1, UInt64(0x2_6602_6060)), (12, UInt64(0x9_131b_26f3))])
    func eachKeyEpochIsItsOwnMachineField(epoch: Int, field: UInt64) {
        #expect(OfflineCode.machineID(fromMachineID: "0123456789abcdef0123456789abcdef\n", epoch: epoch) == field)
    }

    /// Every counter of an epoch fits the challenge's 20 bits and none is 0.
    @Test func theCountersOfAnEpochFitTheChallenge() {
        #expect(OfflineCode.countersPerEpoch == (1 << 20) - 1)
        let last = OfflineCode.Challenge(machine: 1, registration: 1, request: .lift, counter: UInt32(OfflineCode.countersPerEpoch))
        #expect(Int64(last.counter) == OfflineCode.countersPerEpoch)
    }
}

/// How often one registration may ask for a challenge, as a table: ten in an hour-long
/// window that starts at the first, then refused until it ends; a clock set back starts a
/// new window.
@Suite struct OfflineChallengeRateTests {
    typealias W = OfflineChallengeRate.Window

    @Test(
        arguments: [
            (nil, 1_000, OfflineChallengeRate.Decision.allowed(W(start: 1_000, count: 1))),
            (W(start: 1_000, count: 1), 1_001, .allowed(W(start: 1_000, count: 2))),
            (W(start: 1_000, count: 9), 4_599, .allowed(W(start: 1_000, count: 10))),
            (W(start: 1_000, count: 10), 1_001, .refused(until: 4_600)),
            (W(start: 1_000, count: 10), 4_599, .refused(until: 4_600)),
            (W(start: 1_000, count: 10), 4_600, .allowed(W(start: 4_600, count: 1))),
            (W(start: 1_000, count: 10), 999, .allowed(W(start: 999, count: 1))),
        ] as [(W?, Int64, OfflineChallengeRate.Decision)])
    func decide(window: W?, now: Int64, expected: OfflineChallengeRate.Decision) {
        #expect(OfflineChallengeRate.decide(after: window, now: now) == expected)
    }
}
