import LockwipeCore
import Testing

/// Which caveats a vault's storage gets: the rows an auditor relies on.
struct WipeCaveatsTests {
    static func media(_ fs: String, rotational: Bool? = true) -> MediaFacts {
        MediaFacts(path: "/v", filesystem: fs, devices: [.init(name: "sda", rotational: rotational)])
    }

    @Test(arguments: [
        // ext4 on a disk: nothing to say.
        (WipeCaveats.Findings(media: media("ext4")), true, [WipeCaveat.Kind]()),
        // Flash: only an overwrite is affected.
        (WipeCaveats.Findings(media: media("ext4", rotational: false)), true, [.nonRotational]),
        (WipeCaveats.Findings(media: media("ext4", rotational: nil)), true, []),
        // Copy-on-write file systems.
        (WipeCaveats.Findings(media: media("btrfs")), true, [.copyOnWrite]),
        (WipeCaveats.Findings(media: media("zfs")), true, [.copyOnWrite]),
        (WipeCaveats.Findings(media: media("bcachefs")), true, [.copyOnWrite]),
        // Snapshots: of the vault's subvolume, or the subvolume is one; unknown says nothing.
        (WipeCaveats.Findings(media: media("btrfs"), snapshots: 2), true, [.copyOnWrite, .snapshots]),
        (WipeCaveats.Findings(media: media("btrfs"), snapshots: 0, isSnapshot: true), true, [.copyOnWrite, .snapshots]),
        (WipeCaveats.Findings(media: media("btrfs"), snapshots: nil), true, [.copyOnWrite]),
        // Reflinked files on xfs: shared extents, not copy-on-write as such.
        (WipeCaveats.Findings(media: media("xfs"), sharedFiles: 3, sharedBytes: 4096), true, [.sharedExtents]),
        // Everything at once, in a fixed order.
        (
            WipeCaveats.Findings(media: media("btrfs", rotational: false), snapshots: 1, sharedFiles: 1, sharedBytes: 1), true,
            [.copyOnWrite, .snapshots, .sharedExtents, .nonRotational]
        ),
        // No overwrite (crypto-erase or unlink only): no caveat.
        (WipeCaveats.Findings(media: media("btrfs", rotational: false), snapshots: 1, sharedFiles: 1, sharedBytes: 1), false, []),
    ])
    func caveats(_ findings: WipeCaveats.Findings, _ overwrite: Bool, _ kinds: [WipeCaveat.Kind]) {
        let found = WipeCaveats.detect(findings, overwrite: overwrite)
        #expect(found.map(\.kind) == kinds)
        #expect(found.allSatisfy { $0.path == "/v" && !$0.detail.isEmpty })
    }

    @Test func theDetailsCarryTheNumbers() {
        let found = WipeCaveats.detect(.init(media: Self.media("btrfs"), snapshots: 2, sharedFiles: 3, sharedBytes: 3 << 20), overwrite: true)
        #expect(found[1].detail.hasPrefix("2 snapshots of the subvolume holding the vault keep its old blocks"))
        #expect(found[2].detail.hasPrefix("3 files (3.0 MiB) share extents"))
        let one = WipeCaveats.detect(.init(media: Self.media("btrfs"), snapshots: 1), overwrite: true)
        #expect(one[1].detail.hasPrefix("1 snapshot of the subvolume holding the vault keeps its old blocks"))
    }
}
