import LockwipeCTL

@main
struct Entrypoint {
    static func main() {
        LockwipeCTL.mainWithExitCodes()
    }
}
