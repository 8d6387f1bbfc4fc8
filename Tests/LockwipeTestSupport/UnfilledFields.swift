/// The paths of the nil optionals and empty arrays in `value` (a `Mirror` walk, from `path`):
/// a golden document meant to fill every field of a type checks that this comes back empty,
/// so that every key of the type is proven by it.
public func unfilledFields(_ value: Any, _ path: String) -> [String] {
    let mirror = Mirror(reflecting: value)
    if mirror.displayStyle == .optional {
        guard let child = mirror.children.first else { return [path] }
        return unfilledFields(child.value, path)
    }
    if mirror.displayStyle == .collection, mirror.children.isEmpty { return [path] }
    if mirror.displayStyle == .enum { return [] }
    return mirror.children.enumerated().flatMap { i, child in unfilledFields(child.value, path + "." + (child.label ?? "\(i)")) }
}
