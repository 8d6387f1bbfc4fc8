import LockwipeCore
import Testing

/// A reported path is whole up to `PATH_MAX`; a deeper one keeps the vault's path and the
/// innermost names, and counts what it left out.
struct ReportedPathTests {
    @Test(arguments: [
        ("/v", 0, ["a", "b"], "/v/a/b"),
        ("/v", 1, ["b"], "/v/…(1 directory)…/b"),
        ("/srv/vault", 19_990, ["d", "d", "file"], "/srv/vault/…(19990 directories)…/d/d/file"),
        ("/v", 0, [], "/v"),
    ])
    func theText(_ root: String, _ omitted: Int, _ tail: [String], _ text: String) {
        #expect(ReportedPath.join(root: root, omitted: omitted, tail: tail) == text)
    }

    @Test(arguments: [
        // Fits: every component, whatever the limit says of them one by one.
        (10, 10 + 3 * 256, [255, 255, 255], 4096, 3),
        (10, 4096, [255, 255, 255], 4096, 3),
        // One byte too long: as many 255-byte names as fit beside the root and the marker.
        (10, 4097, Array(repeating: 255, count: 17), 4096, 15),
        // 1-byte names: (4096 - 10 - 40) / 2.
        (10, 40_010, Array(repeating: 1, count: 2100), 4096, 2023),
        // A name longer than what is left is still named: the entry itself.
        (4000, 8000, [255, 255], 4096, 1),
    ])
    func whatIsKept(_ rootLength: Int, _ whole: Int, _ lengths: [Int], _ limit: Int, _ kept: Int) {
        #expect(ReportedPath.kept(rootLength: rootLength, wholeLength: whole, lengths: lengths, limit: limit) == kept)
    }
}
