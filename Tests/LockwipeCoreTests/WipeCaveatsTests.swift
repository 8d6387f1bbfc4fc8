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
        (WipeCaveats.Findings(media: media("btrfs")), true, [.copyOnWrite, .names]),
        (WipeCaveats.Findings(media: media("zfs")), true, [.copyOnWrite, .names]),
        (WipeCaveats.Findings(media: media("bcachefs")), true, [.copyOnWrite, .names]),
        // Snapshots: of the vault's subvolume, or the subvolume is one; unknown says nothing.
        (WipeCaveats.Findings(media: media("btrfs"), snapshots: 2), true, [.copyOnWrite, .snapshots, .names]),
        (WipeCaveats.Findings(media: media("btrfs"), snapshots: 0, isSnapshot: true), true, [.copyOnWrite, .snapshots, .names]),
        (WipeCaveats.Findings(media: media("btrfs"), snapshots: nil), true, [.copyOnWrite, .names]),
        // Reflinked files on xfs: shared extents, not copy-on-write as such.
        (WipeCaveats.Findings(media: media("xfs"), sharedFiles: 3, sharedBytes: 4096), true, [.sharedExtents, .names]),
        // Names: only ext4's are cleared by the wipe; tmpfs has no device to keep them on.
        (WipeCaveats.Findings(media: media("xfs")), true, [.names]),
        (WipeCaveats.Findings(media: media("f2fs")), true, [.names]),
        (WipeCaveats.Findings(media: media("0x1234")), true, [.names]),
        (WipeCaveats.Findings(media: media("tmpfs", rotational: nil)), true, []),
        (WipeCaveats.Findings(media: media("xfs")), false, []),
        // Everything at once, in a fixed order.
        (
            WipeCaveats.Findings(media: media("btrfs", rotational: false), snapshots: 1, sharedFiles: 1, sharedBytes: 1), true,
            [.copyOnWrite, .snapshots, .sharedExtents, .names, .nonRotational]
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

    @Test func namesSayWhereTheyStayAndWhatAvoidsThem() {
        let xfs = WipeCaveats.leftNames(path: "/v", filesystem: "xfs")
        #expect(xfs?.kind == .names)
        #expect(xfs?.detail.hasPrefix("xfs keeps the names of removed files and directories in its directory blocks and its journal") == true)
        #expect(xfs?.detail.contains("encrypted vault") == true)
        let btrfs = WipeCaveats.leftNames(path: "/v", filesystem: "btrfs")
        #expect(btrfs?.detail.contains("metadata trees") == true)
        #expect(WipeCaveats.leftNames(path: "/v", filesystem: "ext4") == nil)
        let failed = WipeCaveats.namesNotCleared(path: "/v", reason: "the journal could not be overwritten (Operation not permitted)")
        #expect(failed.kind == .names && failed.path == "/v")
        #expect(failed.detail.contains("may remain on the device (directory blocks, the journal): the journal could not be overwritten (Operation not permitted)"))
    }

    @Test(arguments: [
        ("6.18.44-fc-v669", true), ("5.14.0-70.el9.x86_64", true), ("5.15.0-91-generic", true), ("6.1.0-18-amd64", true),
        ("5.13.19", false), ("5.10.0-28-amd64", false), ("4.19.0", false), ("10.0", true), ("", false), ("garbage", false), ("6", false),
    ])
    func ext4WipesNamesFrom514(_ release: String, _ wipes: Bool) {
        #expect(WipeCaveats.ext4WipesNames(kernelRelease: release) == wipes)
    }
}
