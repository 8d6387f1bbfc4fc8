import LockwipeCore
import Testing

/// The three readers of a wipe report get texts worded in one place; these rows pin them.
struct WipeSummaryTextTests {
    static var overwrite: WipeSummary {
        WipeSummary(
            filesOverwritten: 3, bytesOverwritten: 3 * 1_048_576, entriesRemoved: 5, skipped: [], elapsedSeconds: 1.234,
            passes: 1, pattern: "random", attributesCleared: 1)
    }
    static var crypto: WipeSummary {
        var s = WipeSummary(filesOverwritten: 0, bytesOverwritten: 0, entriesRemoved: 4, skipped: [], elapsedSeconds: 0.5)
        s.keyDestroyedAt = "2027-01-01T00:00:00Z"
        s.keyDestroyedSeconds = 0.0421
        return s
    }
    static var incomplete: WipeSummary {
        WipeSummary(
            filesOverwritten: 1, bytesOverwritten: 10, entriesRemoved: 2, skipped: [.init(path: "/v/m", reason: "a mount point")],
            elapsedSeconds: 0.1, passes: 2, pattern: "zeros")
    }

    @Test(arguments: [
        (overwrite, false, "5 entries removed, 3 files overwritten (3145728 bytes, 1 random pass) in 1.23 s"),
        (overwrite, true, "5 entries removed, 3 files overwritten (3145728 bytes, 1 random pass) in 1.23 s (resumed)"),
        (crypto, false, "crypto-erased: key destroyed at 2027-01-01T00:00:00Z (0.042 s after the wipe request), 4 entries removed, no overwrite pass needed"),
        (incomplete, false, "incomplete: /v/m: a mount point"),
    ])
    func theHistoryLine(_ s: WipeSummary, _ resumed: Bool, _ text: String) {
        #expect(s.recordText(resumed: resumed) == text)
    }

    @Test(arguments: [
        (overwrite, "wiped: 5 entries removed"),
        (crypto, "wiped: crypto-erased: key destroyed at 2027-01-01T00:00:00Z (0.042 s after the wipe request), 4 entries removed, no overwrite pass needed"),
        (incomplete, "INCOMPLETE: 2 entries removed, 1 could not be removed; the wipe stays pending"),
    ])
    func theResult(_ s: WipeSummary, _ text: String) {
        #expect(s.resultText == text)
    }

    @Test(arguments: [
        (
            overwrite,
            [
                "removed 5 entries, overwrote 3 files (3.0 MiB, 1 random pass) in 1.23 s",
                "cleared the immutable/append-only attribute of 1 entry",
            ]
        ),
        (crypto, ["crypto-erased: key destroyed at 2027-01-01T00:00:00Z (0.042 s after the request); 4 entries (ciphertext) removed, no overwrite pass needed, in 0.50 s"]),
        (incomplete, ["removed 2 entries, overwrote 1 file (10 B, 2 zeros passes) in 0.10 s", "not removed: /v/m: a mount point"]),
    ])
    func theReportLines(_ s: WipeSummary, _ lines: [String]) {
        #expect(s.reportLines == lines)
    }

    static var caveated: WipeSummary {
        var s = overwrite
        s.caveats = [
            WipeCaveat(kind: .snapshots, path: "/v", detail: "1 snapshot shares the vault's old blocks"),
            WipeCaveat(kind: .copyOnWrite, path: "/v", detail: "btrfs writes new blocks"),
            WipeCaveat(kind: .copyOnWrite, path: "/w", detail: "btrfs writes new blocks"),
        ]
        return s
    }

    /// Caveats never make a wipe incomplete, and every text says them.
    @Test func caveatsAreSaidEverywhere() {
        let s = Self.caveated
        #expect(s.complete)
        #expect(s.recordText(resumed: false).hasSuffix("in 1.23 s; caveats: copy-on-write, snapshots"))
        #expect(
            Array(s.reportLines.suffix(3)) == [
                "caveat (snapshots): /v: 1 snapshot shares the vault's old blocks",
                "caveat (copy-on-write): /v: btrfs writes new blocks",
                "caveat (copy-on-write): /w: btrfs writes new blocks",
            ])
        #expect(Self.incomplete.recordText(resumed: false) == "incomplete: /v/m: a mount point")
    }
}
