import Crypto
import Foundation
import LockwipeCore
import Testing

@testable import LockwipeDaemon

@Suite struct ConfigurationLoaderTests {
    func withFiles(_ files: [String: String], _ body: (String) throws -> Void) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lwcfg-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir + "/lockwiped.toml.d", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for (name, text) in files { try text.write(toFile: dir + "/" + name, atomically: true, encoding: .utf8) }
        try body(dir + "/lockwiped.toml")
    }

    @Test func vaultAllowancesAreDirectoriesInsideTheGuardedAreasWithTheirLine() throws {
        try withFiles(["lockwiped.toml": "[vault]\nallow_under = [\"/opt/fieldapp/data\", \"/var/lib/fieldapp/\"]\n"]) { path in
            let loaded = try ConfigurationLoader.load(path: path)
            #expect(loaded.configuration.vaultAllowedUnder == ["/opt/fieldapp/data", "/var/lib/fieldapp"])
        }
        for (value, phrase) in [
            ("\"/opt/app\"", "must be a list"), ("[\"/etc/app\"]", "system directory /etc"),
            ("[\"/srv/app\"]", "need no allowance"), ("[3]", "only strings"),
        ] {
            try withFiles(["lockwiped.toml": "# site\n[vault]\nallow_under = \(value)\n"]) { path in
                let found = problems(path)
                #expect(found.count == 1 && found[0].line == 3 && found[0].key == "vault.allow_under" && found[0].message.contains(phrase), "\(found)")
            }
        }
    }

    /// `[server] protocol`: lockwipe by default; SAP needs application_id and derives the
    /// device id from the machine id unless device_id is set.
    @Test func serverProtocolAndSAPIdentity() throws {
        let base = "[server]\nurl = \"https://tenant.example.com\"\n"
        // A machine id of its own beside the file: this machine's /etc/machine-id is not
        // read (a container or chroot may have none).
        let machineIDFile = "3d1219c7c4c5404aaa1f6d2a48adfda4\n"
        func machineIDPath(beside path: String) -> String { (path as NSString).deletingLastPathComponent + "/machine-id" }
        try withFiles(["lockwiped.toml": base, "machine-id": machineIDFile]) { path in
            let machineID = machineIDPath(beside: path)
            #expect(try ConfigurationLoader.load(path: path, machineIDPath: machineID).configuration.server.serverProtocol == .lockwipe)
            #expect(try ConfigurationLoader.load(path: path, machineIDPath: machineID).configuration.server.sapIdentity == nil)
            try (base + "protocol = \"sap-mobile-services\"\napplication_id = \"com.example.app\"\n").write(toFile: path, atomically: true, encoding: .utf8)
            let sap = try ConfigurationLoader.load(path: path, machineIDPath: machineID).configuration.server
            #expect(sap.sapIdentity == SAPIdentity(applicationID: "com.example.app", deviceID: "00a6c677e7b941f7815d67575a4d941a"))
            try (base + "protocol = \"sap-mobile-services\"\napplication_id = \"a\"\ndevice_id = \"dev-1\"\n").write(toFile: path, atomically: true, encoding: .utf8)
            #expect(try ConfigurationLoader.load(path: path, machineIDPath: "/nonexistent").configuration.server.deviceID == "dev-1")
            try (base + "protocol = \"sap-mobile-services\"\napplication_id = \"a\"\ndevice_id = \"d\"\napplication_version = \"2.1.0\"\n").write(
                toFile: path, atomically: true, encoding: .utf8)
            let versioned = try ConfigurationLoader.load(path: path, machineIDPath: "/nonexistent").configuration.server
            #expect(versioned.sapIdentity == SAPIdentity(applicationID: "a", deviceID: "d", applicationVersion: "2.1.0"))
        }
        let table: [(String, Int, String, String)] = [
            ("protocol = \"sap\"\n", 3, "server.protocol", "must be \"lockwipe\" or \"sap-mobile-services\", not \"sap\""),
            ("protocol = \"sap-mobile-services\"\n", 3, "server.application_id", "needs application_id"),
            ("protocol = \"sap-mobile-services\"\napplication_id = \"has space\"\n", 4, "server.application_id", "visible ASCII"),
            ("application_id = \"\"\n", 3, "server.application_id", "must not be empty"),
            ("device_id = 7\n", 3, "server.device_id", "must be a string"),
            ("application_version = 2\n", 3, "server.application_version", "must be a string"),
            ("application_version = \"\"\n", 3, "server.application_version", "must not be empty"),
            ("application_version = \"1.0 beta\"\n", 3, "server.application_version", "visible ASCII"),
        ]
        for (extra, line, key, phrase) in table {
            try withFiles(["lockwiped.toml": base + extra, "machine-id": machineIDFile]) { path in
                let found = problems(path, machineIDPath: machineIDPath(beside: path))
                #expect(found.count == 1 && found[0].line == line && found[0].key == key && found[0].message.contains(phrase), "\(found)")
            }
        }
        // Without device_id and without a machine id: named, not guessed.
        try withFiles(["lockwiped.toml": base + "protocol = \"sap-mobile-services\"\napplication_id = \"a\"\n"]) { path in
            do throws(ConfigurationError) {
                _ = try ConfigurationLoader.load(path: path, machineIDPath: "/nonexistent/machine-id")
                Issue.record("loaded without a device id")
            } catch {
                #expect(error.problems.map(\.key) == ["server.device_id"] && error.problems[0].line == 3)
            }
        }
    }

    @Test func liftAfterContactIsAtLoginUnlessSaidAndNamesItsLine() throws {
        try withFiles(["lockwiped.toml": "[lock]\nterminate_processes = true\n"]) { path in
            let configuration = try ConfigurationLoader.load(path: path).configuration
            #expect(configuration.liftAfterContact == .atLogin)
        }
        try withFiles(["lockwiped.toml": "[lock]\nlift_after_contact = \"immediately\"\n"]) { path in
            let configuration = try ConfigurationLoader.load(path: path).configuration
            #expect(configuration.liftAfterContact == .immediately)
        }
        for (value, phrase) in [("\"never\"", "must be \"at-login\" or \"immediately\", not \"never\""), ("true", "must be \"at-login\" or \"immediately\", not a")] {
            try withFiles(["lockwiped.toml": "[lock]\nterminate_processes = true\nlift_after_contact = \(value)\n"]) { path in
                let found = problems(path)
                #expect(
                    found.count == 1 && found[0].line == 3 && found[0].key == "lock.lift_after_contact" && found[0].message.contains(phrase), "\(found)")
            }
        }
    }

    @Test func keysSealingIsAutoUnlessSaidAndBadValuesNameTheirLine() throws {
        try withFiles(["lockwiped.toml": "[keys]\nseal = \"tpm2\"\ntpm2_pcrs = \"7+14\"\ntpm2_device = \"swtpm:path=/run/t/sock\"\n"]) { path in
            let keys = try ConfigurationLoader.load(path: path).configuration.keys
            #expect(keys.setting == .tpm2 && keys.tpm2PCRs == "7+14" && keys.tpm2Device == "swtpm:path=/run/t/sock")
        }
        #expect(Configuration().keys.setting == .auto && Configuration().keys.tpm2PCRs == "7" && Configuration().keys.tpm2Device == nil)
        #expect(Configuration().recoveryPublicKey == nil)
        let recovery = RecoveryPublicKey(Curve25519.KeyAgreement.PrivateKey().publicKey)
        try withFiles(["lockwiped.toml": "[keys]\nrecovery_public_key = \"\(recovery.base64)\"\n"]) { path in
            let loaded = try ConfigurationLoader.load(path: path).configuration.recoveryPublicKey
            #expect(loaded == recovery)
        }
        for (line, phrase) in [
            ("seal = \"tpm\"", "must be one of \"auto\", \"tpm2\", \"host\", \"none\", not \"tpm\""),
            ("tpm2_pcrs = \"7,14\"", "must be PCR numbers 0 to 23 joined by +"),
            ("tpm2_pcrs = \"24\"", "must be PCR numbers 0 to 23 joined by +"),
            ("tpm2_device = \"tpmrm0\"", "must be an absolute device path"),
            ("recovery_public_key = \"lwr-0011\"", "is not base64 (it is the line lockwipectl recovery-key new prints)"),
            ("recovery_public_key = \"AAAA\"", "is 3 bytes, not the 32 bytes of an X25519 public key"),
            ("recovery_public_key = 5", "the base64 public key lockwipectl recovery-key new prints"),
        ] {
            try withFiles(["lockwiped.toml": "[keys]\n\(line)\n"]) { path in
                let found = problems(path)
                #expect(found.count == 1 && found[0].line == 2 && found[0].key.hasPrefix("keys.") && found[0].message.contains(phrase), "\(found)")
            }
        }
    }

    @Test func missingFileMeansDefaultsWithANotice() throws {
        let loaded = try ConfigurationLoader.load(path: "/nonexistent/lockwiped.toml")
        #expect(loaded.configuration == Configuration())
        #expect(loaded.configuration.policy == .never)
        #expect(loaded.notices.count == 1)
    }

    @Test func aNamedFileThatIsMissingIsAnError() {
        do throws(ConfigurationError) {
            _ = try ConfigurationLoader.load(path: "/nonexistent/typo.toml", named: true)
            Issue.record("a missing --config file loaded")
        } catch {
            #expect(
                error.problems.map(\.description) == [
                    "/nonexistent/typo.toml: no such file (it was named with --config; only the default /etc/lockwipe/lockwiped.toml may be missing, which means the defaults)"
                ])
        }
    }

    @Test func aDirectoryIsNamedAsSuchWithoutInternals() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lockwipe-cfg-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for named in [false, true] {
            do throws(ConfigurationError) {
                _ = try ConfigurationLoader.load(path: dir, named: named)
                Issue.record("a directory loaded as the configuration")
            } catch {
                #expect(error.problems.map(\.description) == ["\(dir): is a directory, not a configuration file"])
            }
        }
    }

    @Test func problemsAreOrderedByFileInReadingOrderThenLine() {
        func p(_ file: String, _ line: Int?, _ key: String) -> ConfigurationProblem {
            ConfigurationProblem(file: file, line: line, key: key, message: "m")
        }
        let files = ["/etc/l.toml", "/etc/l.toml.d/10-a.toml", "/etc/l.toml.d/20-b.toml"]
        let found = [
            p(files[2], 3, "c"), p(files[0], 9, "a9"), p("/other", 1, "o"), p(files[0], nil, "anil"), p(files[1], 2, "b2"),
            p(files[0], 2, "a2"), p(files[0], 9, "a9-second"), p(files[1], 1, "b1"),
        ]
        #expect(ConfigurationLoader.ordered(found, files: files).map(\.key) == ["a2", "a9", "a9-second", "anil", "b1", "b2", "c", "o"])
    }

    @Test func typeNamesTakeTheirArticle() throws {
        try withFiles(["lockwiped.toml": "[lock]\nterminate_processes = 5\n[vault]\nallow_under = 3\n[control]\nadmin_group = [1]\n"]) { path in
            do throws(ConfigurationError) {
                _ = try ConfigurationLoader.load(path: path)
                Issue.record("loaded")
            } catch {
                let text = error.problems.map(\.message)
                #expect(text.contains("must be true or false, not an integer (5)"), "\(text)")
                #expect(text.contains { $0.hasSuffix("not an integer") }, "\(text)")
                #expect(text.contains("must be a string, not an array"), "\(text)")
                #expect(!text.contains { $0.contains(" a integer") || $0.contains(" a array") })
            }
        }
    }

    @Test func dropInsApplyInLexicalOrderLaterWins() throws {
        try withFiles([
            "lockwiped.toml": "[policy]\noffline_days_before_lock = 7\noffline_days_before_wipe = 30\n",
            "lockwiped.toml.d/10-a.toml": "[policy]\noffline_days_before_lock = 3\n",
            "lockwiped.toml.d/20-b.toml": "[policy]\noffline_days_before_lock = 5\n[lock]\nterminate_processes = false\n",
            "lockwiped.toml.d/notes.txt": "ignored",
        ]) { path in
            let c = try ConfigurationLoader.load(path: path).configuration
            #expect(c.policy == Policy(offlineDaysBeforeLock: 5, offlineDaysBeforeWipe: 30))
            #expect(c.terminateProcesses == false)
        }
    }

    @Test func everyProblemIsReportedWithFileKeyAndLine() throws {
        try withFiles([
            "lockwiped.toml": "[policy]\noffline_days_before_lock = \"seven\"\nofline_days_before_wipe = 3\n\n[hooks]\ntimeout_seconds = -1\n[nonsense]\nx = 1\n"
        ]) { path in
            do {
                let text = problems(path).map(\.description)
                #expect(text.contains("\(path):2: policy.offline_days_before_lock: must be an integer, not a string (\"seven\")"))
                #expect(text.contains { $0.hasPrefix("\(path):3: policy.ofline_days_before_wipe: unknown key") })
                #expect(text.contains("\(path):6: hooks.timeout_seconds: must be 1 or more, not -1"))
                #expect(text.contains { $0.hasPrefix("\(path):7: nonsense: unknown table") })
                #expect(text.count == 4)
            }
        }
    }

    @Test func passcodeTableSetsEveryRuleAndRejectsImpossibleOnes() throws {
        try withFiles([
            "lockwiped.toml": """
            [passcode]
            min_length = 10
            requires_digit = true
            requires_lower = true
            requires_upper = true
            requires_special = true
            min_unique_chars = 6
            min_character_classes = 3
            expiration_days = 90
            retry_limit = 5
            lock_timeout = 120
            default_password_allowed = false

            """
        ]) { path in
            let p = try ConfigurationLoader.load(path: path).configuration.passcode
            var expected = PasscodePolicy()
            expected.minLength = 10
            (expected.requiresDigit, expected.requiresLower, expected.requiresUpper, expected.requiresSpecial) = (true, true, true, true)
            expected.minUniqueChars = 6
            expected.minCharacterClasses = 3
            expected.expirationDays = 90
            expected.retryLimit = 5
            expected.lockTimeout = 120
            expected.defaultPasswordAllowed = false
            #expect(p == expected)
        }
        try withFiles([
            "lockwiped.toml": "[passcode]\nmin_character_classes = 5\nretry_limit = -1\nrequires_digit = \"yes\"\n"
        ]) { path in
            let text = problems(path).map(\.description)
            #expect(text.contains("\(path):2: passcode.min_character_classes: must be 0 (no rule) to 4 (all of digits, lower case, upper case, special), not 5"))
            #expect(text.contains("\(path):3: passcode.retry_limit: must be 0 or more, not -1"))
            #expect(text.contains { $0.hasPrefix("\(path):4: passcode.requires_digit: must be true or false") })
            #expect(text.count == 3)
        }
    }

    @Test func wipeNotAfterLockNamesTheFileThatSetIt() throws {
        try withFiles([
            "lockwiped.toml": "[policy]\noffline_days_before_lock = 7\n",
            "lockwiped.toml.d/50-bad.toml": "\n[policy]\noffline_days_before_wipe = 7\n",
        ]) { path in
            let found = problems(path)
            #expect(found.count == 1)
            #expect(found.first?.file.hasSuffix("lockwiped.toml.d/50-bad.toml") == true)
            #expect(found.first?.line == 3)
            #expect(found.first?.key == "policy.offline_days_before_wipe")
        }
    }

    @Test func syntaxErrorsCarryTheParsersLine() throws {
        try withFiles(["lockwiped.toml": "[policy]\noffline_days_before_lock = \n"]) { path in
            let found = problems(path)
            #expect(found.first?.line == 2)
            #expect(found.first?.message.hasPrefix("not valid TOML") == true)
        }
    }

    @Test func serverTableWithDefaultsAndUnits() throws {
        try withFiles(["lockwiped.toml": "[server]\nurl = \"https://mdm.example.com/lw\"\n"]) { path in
            let s = try ConfigurationLoader.load(path: path).configuration.server
            #expect(s == ServerConfiguration(url: "https://mdm.example.com/lw", intervalSeconds: 900, timeoutSeconds: 10, caFile: nil))
        }
        #expect(Configuration().server.isConfigured == false)
    }

    @Test func plainHTTPOnlyToLoopbackAndEveryServerProblemHasItsLine() throws {
        try withFiles([
            "lockwiped.toml": "[server]\nurl = \"http://mdm.example.com\"\ninterval = 0\ntimeout = \"10\"\nca_file = \"/nonexistent/ca.pem\"\n"
        ]) { path in
            let text = problems(path).map(\.description)
            #expect(text.contains { $0.hasPrefix("\(path):2: server.url: plain http:// is allowed only to a loopback host") })
            #expect(text.contains("\(path):3: server.interval: must be 1 or more, not 0"))
            #expect(text.contains { $0.hasPrefix("\(path):4: server.timeout: must be an integer") })
            #expect(text.contains("\(path):5: server.ca_file: /nonexistent/ca.pem: no such file"))
            #expect(text.count == 4)
        }
        try withFiles(["lockwiped.toml": "[server]\nurl = \"http://127.0.0.1:8470\"\ninterval = 60\nallow_insecure_http = true\n"]) { path in
            let server = try ConfigurationLoader.load(path: path).configuration.server
            #expect(server.intervalSeconds == 60)
            #expect(server.usesInsecureHTTP && server.allowInsecureHTTP)
        }
    }

    /// Issue 12, finding 8: any local user can bind a loopback port first, so plain http://
    /// needs the operator's explicit `allow_insecure_http = true`.
    @Test func loopbackHTTPNeedsAllowInsecureHTTPNamedAtTheURLsLine() throws {
        try withFiles(["lockwiped.toml": "[policy]\noffline_days_before_lock = 2\n\n[server]\nurl = \"http://127.0.0.1:8470\"\n"]) { path in
            let found = problems(path)
            #expect(found.count == 1)
            #expect(found.first?.description.hasPrefix("\(path):5: server.url: plain http:// needs allow_insecure_http = true in [server]") == true)
        }
        // Set in a drop-in, refused where the URL was set; allowed from another file.
        try withFiles([
            "lockwiped.toml": "[server]\nallow_insecure_http = false\n",
            "lockwiped.toml.d/10-server.toml": "[server]\nurl = \"http://localhost:8470\"\n",
        ]) { path in
            let found = problems(path)
            #expect(found.map(\.key) == ["server.url"])
            #expect(found.first?.file.hasSuffix("lockwiped.toml.d/10-server.toml") == true)
            #expect(found.first?.line == 2)
        }
        try withFiles([
            "lockwiped.toml": "[server]\nurl = \"http://localhost:8470\"\n",
            "lockwiped.toml.d/10-allow.toml": "[server]\nallow_insecure_http = true\n",
        ]) { path in
            let server = try ConfigurationLoader.load(path: path).configuration.server
            #expect(server.usesInsecureHTTP)
        }
        // https needs no permission, and the key does not make it insecure.
        try withFiles(["lockwiped.toml": "[server]\nurl = \"https://127.0.0.1:8470\"\nallow_insecure_http = true\n"]) { path in
            let server = try ConfigurationLoader.load(path: path).configuration.server
            #expect(server.usesInsecureHTTP == false)
        }
    }
}

/// What loading the configuration at `path` finds wrong (empty: it loads). Shared by the
/// configuration test suites.
func problems(_ path: String, machineIDPath: String = ConfigurationLoader.machineIDPath) -> [ConfigurationProblem] {
    do throws(ConfigurationError) {
        _ = try ConfigurationLoader.load(path: path, machineIDPath: machineIDPath)
        return []
    } catch {
        return error.problems
    }
}
