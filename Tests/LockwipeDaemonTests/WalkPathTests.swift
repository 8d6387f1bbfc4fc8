import Foundation
import LockwipeCore
import Testing

@testable import LockwipeDaemon
@testable import LockwipeWipe

/// A walk keeps one name per level, and spells a path out only to report it.
@Suite struct WalkPathTests {
    static func chain(_ depth: Int, name: String, root: String = "/srv/vault") -> WalkPath {
        let bytes = Array(name.utf8CString)
        var node = WalkPath(root: root)
        for _ in 0..<depth { node = WalkPath(bytes, in: node) }
        return node
    }

    @Test func aShallowPathIsWhole() {
        let dir = Self.chain(3, name: "d")
        #expect(dir.text() == "/srv/vault/d/d/d")
        #expect(EntryPath(directory: dir, name: Array("f\n.txt".utf8CString)).description == "/srv/vault/d/d/d/f\n.txt")
        #expect(WalkPath(root: "/srv/vault").text() == "/srv/vault")
        #expect(dir.depth == 3 && dir.length == "/srv/vault/d/d/d".utf8.count)
    }

    /// 20,000 levels of 255-byte names: 5 MB spelled out whole; reported, at most a few KB
    /// that name the vault, how many directories were left out, and the entry.
    @Test func aDeepPathIsShortenedInTheMiddle() {
        let name = String(repeating: "n", count: 255)
        let dir = Self.chain(20_000, name: name)
        let text = EntryPath(directory: dir, name: Array("leaf.txt".utf8CString)).description
        #expect(text.utf8.count <= ReportedPath.limit)
        #expect(text.hasPrefix("/srv/vault/…("))
        #expect(text.hasSuffix("/" + name + "/leaf.txt"))
        let kept = text.split(separator: "…").last!.split(separator: "/").count
        let omitted = Int(text.split(separator: "(")[1].split(separator: " ")[0])!
        #expect(kept + omitted == 20_001)
    }

    /// A chain deeper than a thread's stack could hold nested releases is released
    /// (Swift's release of the chain does not recurse: 3,000,000 levels were released
    /// here, so `WalkPath` needs no `deinit` of its own).
    @Test func aVeryLongChainIsReleasedWithoutRecursion() {
        var dir: WalkPath? = Self.chain(200_000, name: "d")
        #expect(dir?.depth == 200_000)
        dir = nil
        #expect(dir == nil)
    }

    /// A node shared by a deeper one survives the deeper one's release.
    @Test func aSharedParentStays() {
        let parent = Self.chain(5, name: "p")
        var child: WalkPath? = WalkPath(Array("c".utf8CString), in: parent)
        child = nil
        #expect(child == nil)
        #expect(parent.text() == "/srv/vault/p/p/p/p/p")
    }
}
