/// How a wipe names an entry it reports (a skipped entry, an error). A vault may hold a
/// chain of directories far deeper than `PATH_MAX` (a user builds one with `mkdirat`,
/// one level at a time): spelled out whole, the path of an entry 20,000 levels down with
/// 255-byte names would be 5 MB, for every report. Up to `limit` bytes a path is reported
/// whole; a longer one keeps the vault's path and the last directories, and says how many
/// it left out between them.
public enum ReportedPath {
    /// Longest path reported whole: `PATH_MAX`, the longest a user can use anyway.
    public static let limit = 4096

    /// `root`, then the components below it (`tail`, outermost first) after `omitted`
    /// left-out directories, e.g. `/srv/vault/…(19990 directories)…/d/d/file`.
    public static func join(root: String, omitted: Int, tail: [String]) -> String {
        var text = root
        if omitted > 0 { text += "/…(\(omitted) \(omitted == 1 ? "directory" : "directories"))…" }
        for component in tail { text += "/" + component }
        return text
    }

    /// How many of the innermost components `join` keeps after a vault path of
    /// `rootLength` bytes, for a whole path of `wholeLength` bytes: all of them when it fits
    /// in `limit` bytes, else as many as fit beside the vault's path and the marker (at
    /// least one: the entry itself is always named). `lengths`: the components' lengths in
    /// bytes, innermost first; all of them when the whole path fits, else at least as many
    /// as could fit in `limit`.
    public static func kept(rootLength: Int, wholeLength: Int, lengths: [Int], limit: Int = limit) -> Int {
        if wholeLength <= limit { return lengths.count }
        // The marker: "/…(" + up to 20 digits + " directories)…" (each ellipsis is 3 bytes).
        var budget = limit - rootLength - 40
        var count = 0
        for length in lengths {
            budget -= 1 + length
            if budget < 0 && count > 0 { break }
            count += 1
        }
        return count
    }
}
