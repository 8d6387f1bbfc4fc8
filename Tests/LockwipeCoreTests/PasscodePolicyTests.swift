import LockwipeCore
import Testing

@Suite struct PasscodePolicyTests {
    func rules(_ policy: PasscodePolicy, _ passcode: String) -> [String] { policy.violations(of: passcode).map(\.rule) }

    @Test func defaultsAreSAPsMinimumLengthOfEightAndNothingElse() {
        let p = PasscodePolicy()
        #expect(rules(p, "abcdefgh") == [])
        #expect(rules(p, "abcdefg") == ["min_length"])
        #expect(p.violations(of: "abc").first?.message == "needs at least 8 characters, has 3")
        #expect(p.problem(with: "abcdefgh") == nil)
        #expect(p.problem(with: "abc") == "min_length: needs at least 8 characters, has 3")
        #expect(p.defaultPasswordAllowed && p.retryLimit == 0 && p.expirationDays == 0 && p.lockTimeout == 0)
    }

    @Test(arguments: CharacterClass.allCases)
    func eachCharacterRuleIsReportedByName(_ c: CharacterClass) {
        var p = PasscodePolicy()
        let (bad, good): (String, String)
        switch c {
        case .digit: (p.requiresDigit, bad, good) = (true, "abcdefgh", "abcdefg1")
        case .lower: (p.requiresLower, bad, good) = (true, "ABCDEFGH", "ABCDEFGh")
        case .upper: (p.requiresUpper, bad, good) = (true, "abcdefgh", "abcdefgH")
        case .special: (p.requiresSpecial, bad, good) = (true, "abcdefgh", "abcdefg!")
        }
        #expect(rules(p, bad) == ["requires_\(c.rawValue)"])
        #expect(p.problem(with: bad)?.hasPrefix("requires_\(c.rawValue): ") == true)
        #expect(rules(p, good) == [])
    }

    @Test func everyViolatedRuleIsListedNotJustTheFirst() {
        var p = PasscodePolicy()
        p.minLength = 10
        p.requiresDigit = true
        p.requiresUpper = true
        p.requiresSpecial = true
        p.minUniqueChars = 6
        p.minCharacterClasses = 3
        #expect(rules(p, "aaaa") == ["min_length", "requires_digit", "requires_upper", "requires_special", "min_unique_chars", "min_character_classes"])
        #expect(rules(p, "Abcdef-12345") == [])
    }

    @Test func uniqueCharactersCountDistinctCharacters() {
        var p = PasscodePolicy()
        p.minLength = 0
        p.minUniqueChars = 4
        #expect(rules(p, "aabbccaa") == ["min_unique_chars"])
        #expect(rules(p, "abcd") == [])
        #expect(rules(p, "ééèê") == ["min_unique_chars"])  // 3 distinct
    }

    @Test func nOfTheCharacterClassesWithoutRequiringAnyOne() {
        var p = PasscodePolicy()
        p.minCharacterClasses = 2
        #expect(rules(p, "abcdefgh") == ["min_character_classes"])
        #expect(rules(p, "abcdefg1") == [])
        #expect(rules(p, "ABCDEFG!") == [])
        p.minCharacterClasses = 4
        #expect(rules(p, "aB3!aB3!") == [])
        #expect(rules(p, "aB3xaB3x") == ["min_character_classes"])
    }

    @Test func expiryCountsWholeDaysFromWhenItWasSet() {
        var p = PasscodePolicy()
        #expect(!p.isExpired(setAt: 0, now: 10_000 * 86_400))  // 0 = never
        p.expirationDays = 30
        #expect(!p.isExpired(setAt: 1_000, now: 1_000 + 30 * 86_400 - 1))
        #expect(p.isExpired(setAt: 1_000, now: 1_000 + 30 * 86_400))
    }

    @Test func retryLimitZeroIsUnlimited() {
        var p = PasscodePolicy()
        #expect(!p.retriesExhausted(failedAttempts: 1_000))
        p.retryLimit = 3
        #expect(!p.retriesExhausted(failedAttempts: 2))
        #expect(p.retriesExhausted(failedAttempts: 3))
    }

    @Test func impossibleSettingsAreProblemsByKey() {
        var p = PasscodePolicy()
        #expect(p.problems.isEmpty)
        p.minCharacterClasses = 5
        p.retryLimit = -1
        #expect(p.problems.map(\.key) == ["retry_limit", "min_character_classes"])
    }

    @Test func serverRulesReplaceLocalOnesRuleByRuleAndOnlyThose() {
        var local = PasscodePolicy()
        local.minLength = 12
        local.requiresDigit = true
        local.retryLimit = 3
        var server = PasscodeSettings()
        server.enabled = true
        server.minLength = 6
        server.requiresUpper = true
        server.lockTimeout = 60
        server.defaultPasswordAllowed = false
        let p = local.overridden(by: server)
        #expect(p.minLength == 6)  // the server's
        #expect(p.requiresUpper && p.lockTimeout == 60 && !p.defaultPasswordAllowed)
        #expect(p.requiresDigit && p.retryLimit == 3)  // not sent: local stays
        #expect(rules(p, "abcdefg") == ["requires_digit", "requires_upper"])
        #expect(rules(local, "abcdefg") == ["min_length", "requires_digit"])
    }

    @Test func aServerPolicyThatIsDisabledOrAbsentLeavesTheLocalOne() {
        var local = PasscodePolicy()
        local.minLength = 12
        var disabled = PasscodeSettings()
        disabled.enabled = false
        disabled.minLength = 4
        #expect(local.overridden(by: disabled) == local)
        #expect(local.overridden(by: nil) == local)
        var unstated = PasscodeSettings()  // enabled not sent: the rules it sends apply
        unstated.minLength = 4
        #expect(local.overridden(by: unstated).minLength == 4)
    }
}
